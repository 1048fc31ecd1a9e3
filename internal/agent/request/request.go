// Package request is the agent's command line: one type per command the operator's binary
// runs in a Job or an init container (snapshot-agent, restore-agent, verify-agent,
// copy-self), with the argv the operator gives it (Args) and the parser the agent reads that
// argv with (ParseSnapshot, ...). Both sides use these types, so a flag is named in one place
// only. It imports nothing of this module: package specs, which builds the Jobs and Pods, and
// package agent, which runs in them, both import it.
//
// An argv is part of a running cluster's Pod and Job specs: Args must keep producing exactly
// the argv of earlier releases for the same request (the flags in the same order), or every
// member restored from a snapshot would be rolled when the operator is upgraded.
package request

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The agent's commands: the first argument of the operator's binary.
const (
	CommandSnapshot = "snapshot-agent"
	CommandRestore  = "restore-agent"
	CommandVerify   = "verify-agent"
	CommandCopySelf = "copy-self"
)

// What the agent uses for a flag that is not given (its field left zero).
const (
	DefaultResultFile = "/dev/termination-log"
	DefaultTimeout    = 30 * time.Minute
	DefaultEtcdutl    = "/usr/local/bin/etcdutl"
)

// Environment variables the agents read secrets from (never flags: flags show in the Pod
// spec), as the Pod specs of package specs set them.
const (
	EnvRootPassword        = "ETCD_ROOT_PASSWORD"
	EnvRootPasswordApplied = "ETCD_ROOT_PASSWORD_APPLIED"
	// The S3 credentials, as every S3 tool reads them.
	EnvAWSAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvAWSSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	// EnvS3CA is the CA bundle to trust for an https endpoint with a private CA.
	EnvS3CA = "S3_CA_PEM"
)

// Store says where snapshots are stored: a directory (a mounted PVC) when Dir is set, else S3.
type Store struct {
	Dir                                      string
	S3Endpoint, S3Bucket, S3Region, S3CAFile string
	S3PathStyle                              bool
}

// args are the store's flags: --dir alone, or the S3 endpoint and bucket (always, so that a
// store left empty is reported as such by the agent) and what else is set.
func (s Store) args() []string {
	if s.Dir != "" {
		return []string{"--dir=" + s.Dir}
	}
	args := []string{"--s3-endpoint=" + s.S3Endpoint, "--s3-bucket=" + s.S3Bucket}
	if s.S3Region != "" {
		args = append(args, "--s3-region="+s.S3Region)
	}
	if s.S3PathStyle {
		args = append(args, "--s3-path-style")
	}
	if s.S3CAFile != "" {
		args = append(args, "--s3-ca-file="+s.S3CAFile)
	}
	return args
}

func (s *Store) bind(fs *flag.FlagSet) {
	fs.StringVar(&s.S3Endpoint, "s3-endpoint", "", "S3 endpoint URL")
	fs.StringVar(&s.S3Bucket, "s3-bucket", "", "S3 bucket")
	fs.StringVar(&s.S3Region, "s3-region", "", "S3 region")
	fs.BoolVar(&s.S3PathStyle, "s3-path-style", false, "address the bucket in the path")
	fs.StringVar(&s.S3CAFile, "s3-ca-file", "", "CA bundle to trust for an https endpoint")
	fs.StringVar(&s.Dir, "dir", "", "root of the mounted volume, instead of S3")
}

// Run holds the flags every agent has besides its store: where its result goes and how long
// it may take. Zero fields are not passed; the agent then uses the defaults (ResultFile,
// Timeout).
type Run struct {
	ResultFile string
	Timeout    time.Duration
}

// ResultFileOrDefault is where the agent writes its JSON result.
func (r Run) ResultFileOrDefault() string {
	if r.ResultFile == "" {
		return DefaultResultFile
	}
	return r.ResultFile
}

// TimeoutOrDefault is how long the agent may take.
func (r Run) TimeoutOrDefault() time.Duration {
	if r.Timeout == 0 {
		return DefaultTimeout
	}
	return r.Timeout
}

func (r *Run) bind(fs *flag.FlagSet) {
	fs.StringVar(&r.ResultFile, "result-file", "", "where the JSON result goes (default "+DefaultResultFile+")")
	fs.DurationVar(&r.Timeout, "timeout", 0, "give up after this long (default "+DefaultTimeout.String()+")")
}

// timeoutArgs is --timeout when it is set: whole seconds as "<n>s", as the Jobs have always
// carried it, anything finer as Go writes a duration.
func (r Run) timeoutArgs() []string {
	switch {
	case r.Timeout == 0:
		return nil
	case r.Timeout%time.Second == 0:
		return []string{"--timeout=" + strconv.FormatInt(int64(r.Timeout/time.Second), 10) + "s"}
	default:
		return []string{"--timeout=" + r.Timeout.String()}
	}
}

func (r Run) resultFileArgs() []string {
	if r.ResultFile == "" {
		return nil
	}
	return []string{"--result-file=" + r.ResultFile}
}

// optional is the flag --name=value when value is set, else nothing.
func optional(name, value string) []string {
	if value == "" {
		return nil
	}
	return []string{"--" + name + "=" + value}
}

// parseFlags parses a command's flags (args without the command itself) into its store and
// run flags and what bind binds. Every argument must be a flag: a stray word would otherwise
// end the parsing silently and drop the flags after it.
func parseFlags(command string, args []string, store *Store, run *Run, bind func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	var usage bytes.Buffer
	fs.SetOutput(&usage)
	bind(fs)
	store.bind(fs)
	run.bind(fs)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return fmt.Errorf("%w\n%s", err, strings.TrimSpace(usage.String()))
	case err != nil:
		return fmt.Errorf("%s: %w", command, err)
	case fs.NArg() > 0:
		return fmt.Errorf("%s: unexpected argument %q: it takes flags only", command, fs.Arg(0))
	}
	return nil
}

// bindFile binds the flags that name the snapshot file an agent works on.
func bindFile(fs *flag.FlagSet, name, uri *string) {
	fs.StringVar(name, "name", "", "S3 key or path in --dir of the snapshot file")
	fs.StringVar(uri, "uri", "", "uri of the snapshot file, for the result and messages")
}

// splitList is a comma-separated flag's value; none for "".
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
