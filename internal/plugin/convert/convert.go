// Package convert translates an EtcdCluster of the official etcd operator
// (operator.etcd.io/v1alpha1) or of the legacy StatefulSet-based operator
// (etcd.aenix.io/v1alpha1) into this operator's EtcdCluster. It is pure: manifests in,
// manifests and notes out.
package convert

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcdversion"
)

// SourceAPIVersion is the API of the manifests Convert reads.
const SourceAPIVersion = "operator.etcd.io/v1alpha1"

// source is the part of operator.etcd.io/v1alpha1 EtcdCluster that has a counterpart.
type source struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Size        *int32       `json:"size"`
		Version     string       `json:"version"`
		StorageSpec *storageSpec `json:"storageSpec"`
		TLS         *tlsSpec     `json:"tls"`
		EtcdOptions []string     `json:"etcdOptions"`
	} `json:"spec"`
}

type storageSpec struct {
	AccessModes       any    `json:"accessModes"`
	StorageClassName  string `json:"storageClassName"`
	VolumeSizeRequest string `json:"volumeSizeRequest"`
	VolumeSizeLimit   string `json:"volumeSizeLimit"`
	PVCName           string `json:"pvcName"`
}

type tlsSpec struct {
	Provider    string `json:"provider"`
	ProviderCfg struct {
		CertManagerCfg *struct {
			IssuerKind       string `json:"issuerKind"`
			IssuerName       string `json:"issuerName"`
			ValidityDuration string `json:"validityDuration"`
		} `json:"certManagerCfg"`
	} `json:"providerCfg"`
}

// Result is one converted cluster and what did not carry over.
type Result struct {
	Cluster *etcdv1.EtcdCluster
	Notes   []string
}

// known spec keys of the source; anything else is reported.
var knownSpecKeys = map[string]bool{"size": true, "version": true, "storageSpec": true, "tls": true, "etcdOptions": true}

// Manifests converts every operator.etcd.io EtcdCluster in a YAML stream; other documents are
// refused so that nothing is silently dropped.
func Manifests(r io.Reader) ([]Result, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []Result
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("reading the manifest: %w", err)
		}
		if len(raw) == 0 {
			continue
		}
		convertOne := One
		if raw["apiVersion"] == LegacyAPIVersion {
			convertOne = Legacy
		}
		res, err := convertOne(raw)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	if len(out) == 0 {
		return nil, errors.New("no EtcdCluster of " + SourceAPIVersion + " or " + LegacyAPIVersion + " in the input")
	}
	return out, nil
}

// One converts one decoded manifest.
func One(raw map[string]any) (Result, error) {
	data, err := yaml.Marshal(raw)
	if err != nil {
		return Result{}, err
	}
	var src source
	if err := yaml.Unmarshal(data, &src); err != nil {
		return Result{}, fmt.Errorf("not an EtcdCluster of %s: %w", SourceAPIVersion, err)
	}
	if src.APIVersion != SourceAPIVersion || src.Kind != "EtcdCluster" {
		return Result{}, fmt.Errorf("%s %s/%s is not an EtcdCluster of %s", src.Kind, src.APIVersion, src.Metadata.Name, SourceAPIVersion)
	}
	c := newCluster(src.Metadata)
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }

	c.Spec.Replicas = src.Spec.Size
	version, vnote := Version(src.Spec.Version)
	c.Spec.Version = version
	if vnote != "" {
		note("%s", vnote)
	}
	notes = append(notes, KnownIssues(version)...)
	notes = append(notes, convertStorage(c, src.Spec.StorageSpec)...)
	notes = append(notes, convertTLS(c, src.Spec.TLS)...)
	opts, rest := Options(src.Spec.EtcdOptions)
	if opts != nil {
		c.Spec.Options = opts
	}
	for _, flag := range rest {
		note("spec.etcdOptions %s has no counterpart: the operator owns names, URLs, data and TLS flags and offers typed spec.options only; dropped", flag)
	}
	if spec, ok := raw["spec"].(map[string]any); ok {
		var extra []string
		for k := range spec {
			if !knownSpecKeys[k] {
				extra = append(extra, k)
			}
		}
		sort.Strings(extra)
		for _, k := range extra {
			note("spec.%s has no counterpart; dropped (see docs/api.md for this operator's fields)", k)
		}
	}
	return Result{Cluster: c, Notes: notes}, nil
}

// Version drops a leading v; it notes versions this operator does not run (older than
// 3.5.0, as spec.version's CEL rule in api/v1alpha2). Every 3.5 patch is kept as it is: the
// operator runs it, refusing only what the patch makes unsafe (docs/compatibility.md).
func Version(v string) (string, string) {
	v = strings.TrimSpace(v)
	parsed, ok := etcdversion.Parse(v)
	if !ok {
		v = strings.TrimPrefix(v, "v")
		return v, fmt.Sprintf("spec.version %q is no X.Y.Z release; set spec.version to one, for example 3.6.16", v)
	}
	if parsed.Less(etcdversion.Oldest) || parsed.Major != etcdversion.Oldest.Major {
		return parsed.String(), fmt.Sprintf("spec.version %s: this operator runs etcd %s or newer in the 3.x line; upgrade the old cluster first", parsed, etcdversion.Oldest)
	}
	return parsed.String(), ""
}

// KnownIssues notes what the operator refuses on an etcd patch with a known bug, and the patch
// to move to (docs/compatibility.md); none for a version without one.
func KnownIssues(version string) []string {
	v, ok := etcdversion.Parse(version)
	if !ok {
		return nil
	}
	if issue, bad := etcdversion.MembershipIssue(v); bad {
		return []string{fmt.Sprintf("spec.version %s: %s (%s): the operator adds and promotes no member (no scale-out, no replacement) until every member runs %s or a newer %d.%d patch; everything else works",
			v, issue.What, issue.Source, issue.FixedIn, issue.FixedIn.Major, issue.FixedIn.Minor)}
	}
	return nil
}

func convertStorage(c *etcdv1.EtcdCluster, s *storageSpec) []string {
	if s == nil {
		return []string{"no spec.storageSpec: the old operator used no volume (data lost with the Pod); the new cluster gets the default 1Gi PVC per member"}
	}
	var notes []string
	if s.StorageClassName != "" {
		c.Spec.Storage.StorageClassName = &s.StorageClassName
	}
	if s.VolumeSizeRequest != "" {
		q, err := resource.ParseQuantity(s.VolumeSizeRequest)
		if err != nil {
			notes = append(notes, fmt.Sprintf("spec.storageSpec.volumeSizeRequest %q is no quantity; the default 1Gi applies", s.VolumeSizeRequest))
		} else {
			c.Spec.Storage.Size = &q
		}
	}
	if s.VolumeSizeLimit != "" {
		notes = append(notes, fmt.Sprintf("spec.storageSpec.volumeSizeLimit %s has no counterpart: a volume is as large as spec.storage.size", s.VolumeSizeLimit))
	}
	if s.PVCName != "" {
		notes = append(notes, fmt.Sprintf("spec.storageSpec.pvcName %s has no counterpart: each member has its own PVC named after it", s.PVCName))
	}
	if modes := fmt.Sprint(s.AccessModes); s.AccessModes != nil && !strings.Contains(modes, "ReadWriteOnce") {
		notes = append(notes, fmt.Sprintf("spec.storageSpec.accessModes %s: member PVCs are ReadWriteOnce", modes))
	}
	return notes
}

func convertTLS(c *etcdv1.EtcdCluster, t *tlsSpec) []string {
	if t == nil {
		return nil
	}
	cm := t.ProviderCfg.CertManagerCfg
	if t.Provider != "cert-manager" || cm == nil || cm.IssuerName == "" {
		return []string{fmt.Sprintf("spec.tls provider %q without a cert-manager issuer has no counterpart; set spec.tls with certManager issuers or your own Secrets (docs/tls.md)", t.Provider)}
	}
	kind := cm.IssuerKind
	if kind == "" {
		kind = "Issuer"
	}
	ref := etcdv1.IssuerReference{Name: cm.IssuerName, Kind: kind}
	c.Spec.TLS = &etcdv1.EtcdClusterTLS{
		// The old operator's members present their server certificate as a client certificate
		// (its guide's etcdctl commands do): mutual TLS on both ports, from the same issuer.
		Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: ref, OperatorClientIssuerRef: ref.DeepCopy()}},
		Peer:   &etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: ref}},
	}
	if cm.ValidityDuration == "" {
		return nil
	}
	lifetime, note := validityDuration(cm.ValidityDuration)
	c.Spec.TLS.ValidityDuration = lifetime
	if note == "" {
		return nil
	}
	return []string{note}
}

// daysRE is a duration that starts with days, as the official operator's API documents its
// validityDuration ("100d12h"); Go's durations, which its operator and this one parse, have
// no days.
var daysRE = regexp.MustCompile(`^([0-9]+)d(.*)$`)

// apiDurationRE is the form spec.tls.validityDuration takes (the CRD's rule).
var apiDurationRE = regexp.MustCompile(`^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$`)

// validityDuration is certManagerCfg.validityDuration as spec.tls.validityDuration: a Go
// duration as it is, one written with days (or in a form the API does not take, such as
// "+5h") in hours; and a note when it was rewritten or cannot be carried (then it is left
// out and the default applies).
func validityDuration(v string) (string, string) {
	const field = "spec.tls.providerCfg.certManagerCfg.validityDuration"
	d, err := time.ParseDuration(v)
	if m := daysRE.FindStringSubmatch(v); err != nil && m != nil {
		days, _ := strconv.Atoi(m[1])
		rest := time.Duration(0)
		if m[2] != "" {
			rest, err = time.ParseDuration(m[2])
		} else {
			err = nil
		}
		d = time.Duration(days)*24*time.Hour + rest
	}
	switch {
	case err != nil:
		return "", fmt.Sprintf("%s %q is no duration; left out: certificates last 90 days (spec.tls.validityDuration, docs/tls.md)", field, v)
	case d < time.Hour:
		return "", fmt.Sprintf("%s %s is below cert-manager's minimum of 1h; left out: certificates last 90 days (spec.tls.validityDuration, docs/tls.md)", field, v)
	case apiDurationRE.MatchString(v):
		return v, ""
	}
	written := d.String()
	if d%time.Hour == 0 {
		written = fmt.Sprintf("%dh", d/time.Hour)
	}
	return written, fmt.Sprintf("%s %s is spec.tls.validityDuration %s: durations here are in hours, minutes and seconds", field, v, written)
}

// Options maps etcd flags onto typed options; it returns the flags without a counterpart.
func Options(flags []string) (*etcdv1.EtcdOptions, []string) {
	o := &etcdv1.EtcdOptions{}
	set := false
	var rest []string
	for _, f := range flags {
		name, value, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		switch name {
		case "auto-compaction-mode":
			o.AutoCompactionMode, set = etcdv1.AutoCompactionMode(value), true
		case "auto-compaction-retention":
			o.AutoCompactionRetention, set = value, true
		case "quota-backend-bytes":
			q, err := resource.ParseQuantity(value)
			if err != nil {
				rest = append(rest, f)
				continue
			}
			o.QuotaBackendBytes, set = &q, true
		case "snapshot-count":
			var n int64
			if _, err := fmt.Sscanf(value, "%d", &n); err != nil {
				rest = append(rest, f)
				continue
			}
			o.SnapshotCount, set = &n, true
		default:
			rest = append(rest, f)
		}
	}
	if !set {
		return nil, rest
	}
	return o, rest
}

// YAML renders results as one YAML stream, each cluster preceded by its notes as comments.
func YAML(results []Result) ([]byte, error) {
	var buf bytes.Buffer
	for i, r := range results {
		if i > 0 {
			buf.WriteString("---\n")
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&buf, "# NOTE: %s\n", n)
		}
		data, err := yaml.Marshal(clean(r.Cluster))
		if err != nil {
			return nil, err
		}
		buf.Write(data)
	}
	return buf.Bytes(), nil
}

// clean leaves out the empty status and creationTimestamp a typed object would print.
func clean(c *etcdv1.EtcdCluster) map[string]any {
	data, _ := yaml.Marshal(c)
	var m map[string]any
	_ = yaml.Unmarshal(data, &m)
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	return m
}
