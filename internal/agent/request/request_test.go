package request

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	s3Store = Store{S3Endpoint: "https://s3.example", S3Bucket: "b", S3Region: "eu-1", S3PathStyle: true}
	allS3   = Store{S3Endpoint: "https://s3.example", S3Bucket: "b", S3Region: "eu-1", S3PathStyle: true, S3CAFile: "/ca.pem"}
	dir     = Store{Dir: "/snapshots"}
	run     = Run{ResultFile: "/tmp/result", Timeout: 90 * time.Second}
	oddRun  = Run{Timeout: 1500 * time.Millisecond}
)

// Every request reads back from its argv as it was, whatever of it is set.
func TestParseReadsBackWhatArgsWrote(t *testing.T) {
	snapshots := []Snapshot{
		{},
		{Name: "k.db", URI: "s3://b/k.db", Owner: "ns/s/u", Endpoints: []string{"https://a:2379", "https://b:2379"},
			CAFile: "/ca", CertFile: "/crt", KeyFile: "/key", ScratchDir: "/scratch", ReportProgress: true, Store: allS3, Run: run},
		{Name: "k.db", URI: "pvc://c/k.db", Owner: "ns/s/u", Delete: true, Checksum: "sha256:abc", Store: dir, Run: oddRun},
	}
	for _, r := range snapshots {
		got, err := ParseSnapshot(r.Args()[1:])
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("ParseSnapshot(%q) = %+v, %v; want %+v", r.Args(), got, err, r)
		}
	}
	restores := []Restore{
		{},
		{Name: "k.db", URI: "s3://b/k.db", Checksum: "sha256:abc", DataDir: "/d", StagingDir: "/s", Etcdutl: "/etcdutl",
			MemberName: "m", InitialCluster: "m=http://m:2380", InitialClusterToken: "t", InitialAdvertisePeerURLs: "http://m:2380",
			Store: allS3, Run: run},
		{Name: "k.db", Store: dir, Run: oddRun},
		{Name: "k.db", Store: dir, Archive: ArchiveTarget{Prefix: "ns/c/nightly.archive", Revision: 42}, Etcd: "/usr/local/bin/etcd"},
		{Name: "k.db", Store: allS3, Archive: ArchiveTarget{Prefix: "p", Time: time.Date(2026, 12, 2, 10, 15, 0, 5, time.UTC)}},
	}
	for _, r := range restores {
		got, err := ParseRestore(r.Args()[1:])
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("ParseRestore(%q) = %+v, %v; want %+v", r.Args(), got, err, r)
		}
	}
	verifies := []Verify{{}, {Name: "k.db", URI: "s3://b/k.db", Checksum: "sha256:abc", Store: s3Store, Run: run}, {Store: dir, Run: oddRun}}
	for _, r := range verifies {
		got, err := ParseVerify(r.Args()[1:])
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("ParseVerify(%q) = %+v, %v; want %+v", r.Args(), got, err, r)
		}
	}
	for _, r := range []CopySelf{{Dest: "/agent/etcd-operator"}, {Dest: "-x"}} {
		got, err := ParseCopySelf(r.Args()[1:])
		if err != nil || got != r {
			t.Errorf("ParseCopySelf(%q) = %+v, %v; want %+v", r.Args(), got, err, r)
		}
	}
}

func TestParseArchiveReadsBackWhatArgsWrote(t *testing.T) {
	archives := []Archive{
		{},
		{Prefix: "nightly/ns/c/nightly.archive", Owner: "ns/nightly/u", Endpoints: []string{"https://a:2379"}, CAFile: "/ca", CertFile: "/crt", KeyFile: "/key",
			SegmentInterval: 5 * time.Second, SegmentMaxBytes: 8 << 20, ReportStatus: true, Store: allS3},
		{Prefix: "snaps/nightly.archive", Store: dir},
	}
	for _, r := range archives {
		got, err := ParseArchive(r.Args()[1:])
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("ParseArchive(%q) = %+v, %v; want %+v", r.Args(), got, err, r)
		}
	}
}

// The argv the operator's Jobs and init containers carried before these types (copied from
// the builders' output): each parses to the request whose Args is that argv again, to the
// byte, so that no running cluster's Job or Pod changes with them.
func TestTheArgvOfEarlierReleasesParseAndComeBackTheSame(t *testing.T) {
	const deadline = 1790 * time.Second
	for _, tc := range []struct {
		argv  []string
		want  interface{ Args() []string }
		parse func([]string) (interface{ Args() []string }, error)
	}{
		{
			[]string{"snapshot-agent", "--name=etcd/ns/main/nightly.db", "--uri=s3://b/etcd/ns/main/nightly.db", "--timeout=1790s", "--owner=ns/nightly/u1", "--endpoints=https://main-client.ns.svc:2379", "--ca-file=/etc/etcd/server-ca/ca.crt", "--scratch-dir=/scratch", "--s3-endpoint=https://s3.example", "--s3-bucket=b", "--s3-region=eu-1", "--s3-path-style"},
			Snapshot{Name: "etcd/ns/main/nightly.db", URI: "s3://b/etcd/ns/main/nightly.db", Owner: "ns/nightly/u1",
				Endpoints: []string{"https://main-client.ns.svc:2379"}, CAFile: "/etc/etcd/server-ca/ca.crt", ScratchDir: "/scratch",
				Store: s3Store, Run: Run{Timeout: deadline}},
			parseAs(ParseSnapshot),
		},
		{
			[]string{"snapshot-agent", "--name=etcd/ns/main/nightly.db", "--uri=s3://b/etcd/ns/main/nightly.db", "--timeout=1790s", "--owner=ns/nightly/u1", "--endpoints=https://main-client.ns.svc:2379", "--ca-file=/etc/etcd/server-ca/ca.crt", "--cert-file=/etc/etcd/client-tls/tls.crt", "--key-file=/etc/etcd/client-tls/tls.key", "--scratch-dir=/scratch", "--s3-endpoint=https://s3.example", "--s3-bucket=b", "--s3-region=eu-1", "--s3-path-style"},
			Snapshot{Name: "etcd/ns/main/nightly.db", URI: "s3://b/etcd/ns/main/nightly.db", Owner: "ns/nightly/u1",
				Endpoints: []string{"https://main-client.ns.svc:2379"}, CAFile: "/etc/etcd/server-ca/ca.crt",
				CertFile: "/etc/etcd/client-tls/tls.crt", KeyFile: "/etc/etcd/client-tls/tls.key", ScratchDir: "/scratch",
				Store: s3Store, Run: Run{Timeout: deadline}},
			parseAs(ParseSnapshot),
		},
		{
			[]string{"snapshot-agent", "--name=snaps/nightly.db", "--uri=pvc://backups/snaps/nightly.db", "--timeout=1790s", "--owner=ns/nightly/u1", "--endpoints=http://main-client.ns.svc:2379", "--scratch-dir=/scratch", "--dir=/snapshots"},
			Snapshot{Name: "snaps/nightly.db", URI: "pvc://backups/snaps/nightly.db", Owner: "ns/nightly/u1",
				Endpoints: []string{"http://main-client.ns.svc:2379"}, ScratchDir: "/scratch", Store: dir, Run: Run{Timeout: deadline}},
			parseAs(ParseSnapshot),
		},
		{
			[]string{"snapshot-agent", "--name=snaps/nightly.db", "--uri=pvc://backups/snaps/nightly.db", "--timeout=1790s", "--owner=ns/nightly/u1", "--delete", "--checksum=sha256:abc", "--dir=/snapshots"},
			Snapshot{Name: "snaps/nightly.db", URI: "pvc://backups/snaps/nightly.db", Owner: "ns/nightly/u1", Delete: true,
				Checksum: "sha256:abc", Store: dir, Run: Run{Timeout: deadline}},
			parseAs(ParseSnapshot),
		},
		{
			[]string{"verify-agent", "--name=p/nightly.db", "--uri=s3://b/p/nightly.db", "--checksum=sha256:abc", "--timeout=1790s", "--s3-endpoint=http://minio:9000", "--s3-bucket=b"},
			Verify{Name: "p/nightly.db", URI: "s3://b/p/nightly.db", Checksum: "sha256:abc",
				Store: Store{S3Endpoint: "http://minio:9000", S3Bucket: "b"}, Run: Run{Timeout: deadline}},
			parseAs(ParseVerify),
		},
		{
			[]string{"restore-agent", "--uri=s3://b/p/nightly.db", "--data-dir=/var/lib/etcd/data", "--staging-dir=/var/lib/etcd/restore", "--etcdutl=/usr/local/bin/etcdutl", "--member-name=r-1", "--initial-cluster=r-1=http://x:2380", "--initial-cluster-token=t", "--initial-advertise-peer-urls=http://r-1.r.ns.svc:2380", "--checksum=sha256:abc", "--s3-endpoint=http://minio:9000", "--s3-bucket=b", "--name=p/nightly.db"},
			Restore{Name: "p/nightly.db", URI: "s3://b/p/nightly.db", Checksum: "sha256:abc", DataDir: "/var/lib/etcd/data",
				StagingDir: "/var/lib/etcd/restore", Etcdutl: "/usr/local/bin/etcdutl", MemberName: "r-1",
				InitialCluster: "r-1=http://x:2380", InitialClusterToken: "t", InitialAdvertisePeerURLs: "http://r-1.r.ns.svc:2380",
				Store: Store{S3Endpoint: "http://minio:9000", S3Bucket: "b"}},
			parseAs(ParseRestore),
		},
		{
			[]string{"restore-agent", "--uri=pvc://backups/snaps/a.db", "--data-dir=/var/lib/etcd/data", "--staging-dir=/var/lib/etcd/restore", "--etcdutl=/usr/local/bin/etcdutl", "--member-name=r-1", "--initial-cluster=r-1=http://x:2380", "--initial-cluster-token=t", "--initial-advertise-peer-urls=http://r-1.r.ns.svc:2380", "--dir=/snapshot-source", "--name=snaps/a.db"},
			Restore{Name: "snaps/a.db", URI: "pvc://backups/snaps/a.db", DataDir: "/var/lib/etcd/data",
				StagingDir: "/var/lib/etcd/restore", Etcdutl: "/usr/local/bin/etcdutl", MemberName: "r-1",
				InitialCluster: "r-1=http://x:2380", InitialClusterToken: "t", InitialAdvertisePeerURLs: "http://r-1.r.ns.svc:2380",
				Store: Store{Dir: "/snapshot-source"}},
			parseAs(ParseRestore),
		},
		{
			[]string{"copy-self", "/agent/etcd-operator"},
			CopySelf{Dest: "/agent/etcd-operator"},
			parseAs(ParseCopySelf),
		},
	} {
		got, err := tc.parse(tc.argv[1:])
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q parses to %+v, %v; want %+v", tc.argv, got, err, tc.want)
		}
		if args := tc.want.Args(); !reflect.DeepEqual(args, tc.argv) {
			t.Errorf("Args of %+v:\n %q\nwant\n %q", tc.want, args, tc.argv)
		}
	}
}

func parseAs[T interface{ Args() []string }](parse func([]string) (T, error)) func([]string) (interface{ Args() []string }, error) {
	return func(args []string) (interface{ Args() []string }, error) { return parse(args) }
}

// A bad argv is refused with an error that names the command and the flag or argument.
func TestABadArgvIsRefusedNamingWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"an unknown flag", errOf(ParseSnapshot([]string{"--shape=x"})), []string{"snapshot-agent", "-shape"}},
		{"a bad duration", errOf(ParseVerify([]string{"--timeout=soon"})), []string{"verify-agent", "-timeout", `"soon"`}},
		{"a bad boolean", errOf(ParseSnapshot([]string{"--delete=maybe"})), []string{"snapshot-agent", "-delete"}},
		{"a stray word", errOf(ParseRestore([]string{"--uri=x", "now", "--name=y"})), []string{"restore-agent", `"now"`}},
		{"help", errOf(ParseRestore([]string{"-h"})), []string{"-initial-cluster-token", "-s3-endpoint"}},
		{"no destination", errOf(ParseCopySelf(nil)), []string{"usage: copy-self DEST"}},
		{"an archive without a target", errOf(ParseRestore([]string{"--archive-prefix=p"})), []string{"restore-agent", "--to-revision", "--to-time"}},
		{"an archive with two targets", errOf(ParseRestore([]string{"--archive-prefix=p", "--to-revision=3", "--to-time=2026-12-02T10:15:00Z"})), []string{"exactly one"}},
		{"a time that is not RFC 3339", errOf(ParseRestore([]string{"--archive-prefix=p", "--to-time=yesterday"})), []string{"-to-time"}},
		{"two destinations", errOf(ParseCopySelf([]string{"a", "b"})), []string{"usage: copy-self DEST"}},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(tc.err.Error(), w) {
				t.Errorf("%s: error %q does not name %s", tc.name, tc.err, w)
			}
		}
	}
}

func errOf[T any](_ T, err error) error { return err }

// The agent's defaults stand for flags not given, so that a request's zero field and an
// absent flag mean the same.
func TestDefaultsStandForFlagsNotGiven(t *testing.T) {
	r, err := ParseRestore(nil)
	if err != nil || r.EtcdutlOrDefault() != DefaultEtcdutl || r.Run.TimeoutOrDefault() != DefaultTimeout || r.Run.ResultFileOrDefault() != DefaultResultFile {
		t.Errorf("defaults: %q %s %q, %v", r.EtcdutlOrDefault(), r.Run.TimeoutOrDefault(), r.Run.ResultFileOrDefault(), err)
	}
	r = Restore{Etcdutl: "/e", Run: run}
	if r.EtcdutlOrDefault() != "/e" || r.Run.TimeoutOrDefault() != run.Timeout || r.Run.ResultFileOrDefault() != run.ResultFile {
		t.Errorf("set: %q %s %q", r.EtcdutlOrDefault(), r.Run.TimeoutOrDefault(), r.Run.ResultFileOrDefault())
	}
}
