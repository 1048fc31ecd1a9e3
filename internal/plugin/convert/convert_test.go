package convert

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// seed004 is the EtcdCluster of the official operator's deployment guide, with its
// placeholders filled in.
const seed004 = `apiVersion: operator.etcd.io/v1alpha1
kind: EtcdCluster
metadata:
  name: etcd-main
  namespace: cpaas-system
spec:
  size: 3
  storageSpec:
    accessModes: ReadWriteOnce
    storageClassName: sc-topolvm
    volumeSizeLimit: 20Gi
    volumeSizeRequest: 10Gi
  tls:
    provider: cert-manager
    providerCfg:
      certManagerCfg:
        issuerKind: Issuer
        issuerName: etcd-ca-issuer
        validityDuration: 87600h
  version: v3.5.21
  etcdOptions:
  - --auto-compaction-mode=periodic
  - --auto-compaction-retention=24h
`

func TestConvertTheGuidesCluster(t *testing.T) {
	results, err := Manifests(strings.NewReader(seed004))
	if err != nil || len(results) != 1 {
		t.Fatalf("%v %v", results, err)
	}
	c := results[0].Cluster
	ref := etcdv1.IssuerReference{Name: "etcd-ca-issuer", Kind: "Issuer"}
	size, class, replicas := resource.MustParse("10Gi"), "sc-topolvm", int32(3)
	want := etcdv1.EtcdClusterSpec{
		Replicas: &replicas, Version: "3.5.21",
		Storage: etcdv1.StorageSpec{Size: &size, StorageClassName: &class},
		TLS: &etcdv1.EtcdClusterTLS{
			Client:           &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{ServerIssuerRef: ref, OperatorClientIssuerRef: &ref}},
			Peer:             &etcdv1.PeerTLS{CertManager: &etcdv1.PeerCertManager{IssuerRef: ref}},
			ValidityDuration: "87600h",
		},
		Options: &etcdv1.EtcdOptions{AutoCompactionMode: etcdv1.AutoCompactionPeriodic, AutoCompactionRetention: "24h"},
	}
	if c.Name != "etcd-main" || c.Namespace != "cpaas-system" || !equality.Semantic.DeepEqual(c.Spec, want) {
		t.Errorf("converted %s/%s\n got %+v\nwant %+v", c.Namespace, c.Name, c.Spec, want)
	}
	notes := strings.Join(results[0].Notes, "\n")
	for _, want := range []string{"volumeSizeLimit 20Gi"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "validityDuration") {
		t.Errorf("validityDuration 87600h is carried as it is, yet a note speaks of it:\n%s", notes)
	}
	out, err := YAML(results)
	if err != nil {
		t.Fatal(err)
	}
	var back etcdv1.EtcdCluster
	if err := yaml.UnmarshalStrict(stripComments(out), &back); err != nil || back.APIVersion != "etcd-operator.cozystack.io/v1alpha2" || back.Spec.Version != "3.5.21" {
		t.Fatalf("printed manifest does not read back: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "status:") || strings.Contains(string(out), "creationTimestamp") {
		t.Errorf("printed manifest carries empty status or timestamps:\n%s", out)
	}
}

func stripComments(b []byte) []byte {
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "#") {
			keep = append(keep, l)
		}
	}
	return []byte(strings.Join(keep, "\n"))
}

func TestKnownIssues(t *testing.T) {
	for in, want := range map[string]string{
		"3.5.12":  "until every member runs 3.5.20",
		"3.5.0":   "until every member runs 3.5.20",
		"3.5.21":  "",
		"3.6.16":  "",
		"latest":  "",
		"v3.5.19": "spec.version 3.5.19",
	} {
		got := strings.Join(KnownIssues(in), "\n")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("KnownIssues(%q) = %q; want one containing %q", in, got, want)
		}
	}
}

func TestVersion(t *testing.T) {
	for in, want := range map[string]struct{ v, note string }{
		"v3.5.21": {"3.5.21", ""},
		"3.5.0":   {"3.5.0", ""},
		"v3.5.35": {"3.5.35", ""},
		"3.6.16":  {"3.6.16", ""},
		"v3.7.3":  {"3.7.3", ""},
		"v3.4.30": {"3.4.30", "3.5.0 or newer"},
		"2.3.8":   {"2.3.8", "3.5.0 or newer"},
		"4.0.0":   {"4.0.0", "3.5.0 or newer"},
		"latest":  {"latest", "no X.Y.Z release"},
		"3.6":     {"3.6", "no X.Y.Z release"},
	} {
		v, note := Version(in)
		if v != want.v || (want.note == "") != (note == "") || !strings.Contains(note, want.note) {
			t.Errorf("Version(%q) = %q, %q; want %q, %q", in, v, note, want.v, want.note)
		}
	}
}

func TestOptions(t *testing.T) {
	o, rest := Options([]string{"--quota-backend-bytes=8589934592", "--snapshot-count=10000", "--auto-compaction-mode=revision",
		"--auto-compaction-retention=1000", "--max-txn-ops=256", "--quota-backend-bytes=lots"})
	if o.QuotaBackendBytes.Value() != 8<<30 || *o.SnapshotCount != 10000 || o.AutoCompactionMode != etcdv1.AutoCompactionRevision || o.AutoCompactionRetention != "1000" {
		t.Errorf("options %+v", o)
	}
	if strings.Join(rest, " ") != "--max-txn-ops=256 --quota-backend-bytes=lots" {
		t.Errorf("rest %v", rest)
	}
	if o, rest := Options([]string{"--heartbeat-interval=100"}); o != nil || len(rest) != 1 {
		t.Errorf("no typed flag: %+v %v", o, rest)
	}
}

func TestTLSAndStorageWithoutCounterpartAreReported(t *testing.T) {
	res, err := One(map[string]any{"apiVersion": SourceAPIVersion, "kind": "EtcdCluster", "metadata": map[string]any{"name": "x"},
		"spec": map[string]any{"size": 1, "version": "3.6.16", "tls": map[string]any{"provider": "auto"}, "imageRegistry": "r.local", "podTemplate": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(res.Notes, "\n")
	for _, want := range []string{`provider "auto"`, "spec.imageRegistry has no counterpart", "spec.podTemplate has no counterpart", "no spec.storageSpec"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if res.Cluster.Spec.TLS != nil {
		t.Errorf("TLS set from provider auto: %+v", res.Cluster.Spec.TLS)
	}
}

func TestOtherKindsAreRefused(t *testing.T) {
	if _, err := Manifests(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n")); err == nil || !strings.Contains(err.Error(), "is not an EtcdCluster of operator.etcd.io/v1alpha1") {
		t.Errorf("ConfigMap: %v", err)
	}
	if _, err := Manifests(strings.NewReader("")); err == nil {
		t.Error("empty input accepted")
	}
}

// certManagerCfg.validityDuration becomes spec.tls.validityDuration: a Go duration as it is,
// the official API's days ("365d", "100d12h", as its docs and samples write them) in hours,
// and what cannot be a certificate's lifetime left out with a note.
func TestConvertCarriesTheCertificateLifetime(t *testing.T) {
	for _, tc := range []struct {
		in, want, note string
	}{
		{"87600h", "87600h", ""},
		{"1h30m", "1h30m", ""},
		{"365d", "8760h", "validityDuration 365d is spec.tls.validityDuration 8760h"},
		{"100d12h", "2412h", "validityDuration 100d12h is spec.tls.validityDuration 2412h"},
		{"+5h", "5h", "validityDuration +5h is spec.tls.validityDuration 5h"},
		{"30m", "", "30m is below cert-manager's minimum of 1h; left out"},
		{"0d", "", "0d is below cert-manager's minimum of 1h; left out"},
		{"a year", "", `"a year" is no duration; left out`},
		{"1d2x", "", `"1d2x" is no duration; left out`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			manifest := strings.Replace(seed004, "validityDuration: 87600h", "validityDuration: "+tc.in, 1)
			results, err := Manifests(strings.NewReader(manifest))
			if err != nil || len(results) != 1 {
				t.Fatalf("%v %v", results, err)
			}
			tls := results[0].Cluster.Spec.TLS
			if tls == nil || tls.ValidityDuration != tc.want || tls.RenewBefore != "" {
				t.Errorf("spec.tls %+v, want validityDuration %q and no renewBefore", tls, tc.want)
			}
			notes := strings.Join(results[0].Notes, "\n")
			if tc.note == "" && strings.Contains(notes, "validityDuration") || !strings.Contains(notes, tc.note) {
				t.Errorf("notes:\n%s\nwant one saying %q", notes, tc.note)
			}
		})
	}
}
