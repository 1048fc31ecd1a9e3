package report

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

const (
	rootPassword = "hunter2-root-pw"
	s3SecretKey  = "wJalrXUtnFEMI-s3-secret"
	privateKey   = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkey\n-----END EC PRIVATE KEY-----\n"
)

// seededSecrets are the namespace's Secrets: the cluster's root password, TLS and S3
// credentials, and one of nobody's.
func seededSecrets() []*corev1.Secret {
	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	return []*corev1.Secret{
		secret("db-root", map[string]string{"username": "root", "password": rootPassword}),
		secret("s3-creds", map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEID", "AWS_SECRET_ACCESS_KEY": s3SecretKey}),
		secret("db-server-tls", map[string]string{"tls.key": privateKey, "ca.crt": "a public CA certificate"}),
		secret("nobodys", map[string]string{"x": "unrelated-value"}),
	}
}

func seededObjects() []client.Object {
	labels := map[string]string{etcdv1.LabelCluster: "db"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "prod", Name: name, Labels: labels}
	}
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db"}}
	c.Spec.Version = "3.6.16"
	c.Spec.Auth = &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "db-root"}}
	pod := &corev1.Pod{ObjectMeta: meta("db-1"), Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "etcd", Image: "etcd", Env: []corev1.EnvVar{{Name: "ETCD_ROOT_PASSWORD", Value: rootPassword}, {Name: "API_TOKEN", Value: "tok-from-env-123"}}}},
		Volumes:    []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-server-tls"}}}},
	}}
	pod.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"env":"` + rootPassword + `"}`}
	snapshot := func(name, cluster string) *etcdv1.EtcdSnapshot {
		s := &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name}}
		s.Spec.ClusterRef.Name = cluster
		s.Spec.Destination.S3 = &etcdv1.S3SnapshotLocation{Bucket: "b", CredentialsSecretRef: corev1.LocalObjectReference{Name: "s3-creds"}}
		return s
	}
	event := func(name, about, message string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name}, InvolvedObject: corev1.ObjectReference{Name: about}, Message: message}
	}
	objs := []client.Object{
		c, pod,
		&etcdv1.EtcdMember{ObjectMeta: meta("db-1")}, &etcdv1.EtcdMember{ObjectMeta: meta("db-2")},
		&corev1.PersistentVolumeClaim{ObjectMeta: meta("data-db-1")}, &corev1.Service{ObjectMeta: meta("db-client")},
		snapshot("nightly", "db"), snapshot("theirs", "other"),
		&etcdv1.EtcdDefragPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "weekly"}, Spec: etcdv1.EtcdDefragPolicySpec{ClusterRef: corev1.LocalObjectReference{Name: "db"}}},
		&etcdv1.EtcdDefragPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "their-policy"}, Spec: etcdv1.EtcdDefragPolicySpec{ClusterRef: corev1.LocalObjectReference{Name: "other"}}},
		event("e1", "db-1", "auth as root with "+rootPassword+" failed"), event("e2", "unrelated-pod", "pulled image"),
	}
	for _, s := range seededSecrets() {
		objs = append(objs, s)
	}
	return objs
}

// fakeSource serves the seeded objects, member logs that leak secrets in several ways, and an
// etcd answer.
func fakeSource(t *testing.T) Source {
	scheme, err := cli.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	logs := map[string]string{
		"db-1": "etcd starting\n{\"password\": \"" + rootPassword + "\"}\nupload with " + s3SecretKey + " raw\n",
		"db-2": "Authorization: Bearer abc.def.ghi\n--client-secret=sssh\n",
	}
	return Source{
		Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(seededObjects()...).Build(), Scheme: scheme, Namespace: "prod",
		Logs: func(_ context.Context, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
			if opts.Previous {
				return nil, errors.New("previous terminated container \"etcd\" in pod \"" + pod + "\" not found")
			}
			return io.NopCloser(strings.NewReader(logs[pod])), nil
		},
		Etcd: func(context.Context) (map[string]any, error) {
			return map[string]any{"etcd/status.json": map[string]string{"note": "members answered; password: " + rootPassword}}, nil
		},
		Version: map[string]string{"plugin": "dev"},
	}
}

// untar is the report's files by their name inside its directory.
func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	dir, files, err := Files(bytes.NewReader(data))
	if err != nil || dir != "db-report-20260102-030405" {
		t.Fatalf("report in directory %q: %v", dir, err)
	}
	return files
}

// No value of any Secret of the namespace (but user names and certificates: publicKeys) is in
// the report in any form, wherever it leaked
// (an env var, an annotation, an event, a log line, etcd's answer); Secrets are there by name.
func TestReportHoldsNoSecretData(t *testing.T) {
	var out bytes.Buffer
	n, problems, err := Write(context.Background(), fakeSource(t), "db", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), &out)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, out.Bytes())
	if len(files) != n {
		t.Errorf("Write says %d files, the tarball has %d", n, len(files))
	}
	for _, leak := range secretValuesIn(files) {
		t.Error(leak)
	}
	for name, body := range files {
		for _, leak := range []string{"abc.def.ghi", "sssh", "PRIVATE KEY-----\nMHc", "tok-from-env-123"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s holds %q", name, leak)
			}
		}
	}
	for _, name := range []string{"db-root", "s3-creds", "db-server-tls"} {
		if !strings.Contains(files["secrets.txt"], name) {
			t.Errorf("secrets.txt does not name %s:\n%s", name, files["secrets.txt"])
		}
	}
	if strings.Contains(files["secrets.txt"], "nobodys") {
		t.Errorf("secrets.txt names a Secret of nobody's:\n%s", files["secrets.txt"])
	}
	if len(problems) != 0 {
		t.Errorf("problems %v", problems)
	}
}

// secretValuesIn says which file holds which seeded Secret's value, as it is or in base64.
func secretValuesIn(files map[string]string) []string {
	var leaks []string
	for _, s := range seededSecrets() {
		for key, v := range s.Data {
			if slices.Contains(publicKeys, key) {
				continue
			}
			for _, form := range []string{string(v), base64.StdEncoding.EncodeToString(v)} {
				for name, body := range files {
					if strings.Contains(body, form) {
						leaks = append(leaks, fmt.Sprintf("%s holds the value of Secret %s key %s (%q)", name, s.Name, key, form))
					}
				}
			}
		}
	}
	return leaks
}

// The report holds the cluster's objects, and only its.
func TestReportContents(t *testing.T) {
	var out bytes.Buffer
	if _, _, err := Write(context.Background(), fakeSource(t), "db", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), &out); err != nil {
		t.Fatal(err)
	}
	files := untar(t, out.Bytes())
	for file, want := range map[string][]string{
		"etcdcluster.yaml":                 {"kind: EtcdCluster", "name: db"},
		"etcdmembers.yaml":                 {"name: db-1", "name: db-2"},
		"etcdsnapshots.yaml":               {"name: nightly"},
		"etcddefragpolicies.yaml":          {"kind: EtcdDefragPolicy", "name: weekly"},
		"pods.yaml":                        {"name: ETCD_ROOT_PASSWORD", "value: REDACTED", "secretName: db-server-tls"},
		"pvcs.yaml":                        {"name: data-db-1"},
		"services.yaml":                    {"name: db-client"},
		"events.yaml":                      {"name: e1", "auth as root with REDACTED failed"},
		"logs/db-1.log":                    {"etcd starting", `"password": "REDACTED"`},
		"logs/db-2.log":                    {"Bearer REDACTED", "--client-secret=REDACTED"},
		"logs/db-1.previous.log.error.txt": {"previous terminated container"},
		"etcd/status.json":                 {"members answered"},
		"version.json":                     {"plugin"},
		"README.txt":                       {"EtcdCluster db in namespace prod"},
	} {
		body, ok := files[file]
		if !ok {
			t.Errorf("no %s in the report", file)
			continue
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q:\n%s", file, w, body)
			}
		}
	}
	for file, unwanted := range map[string]string{"etcdsnapshots.yaml": "theirs", "etcddefragpolicies.yaml": "their-policy", "events.yaml": "unrelated-pod", "pods.yaml": "last-applied-configuration"} {
		if strings.Contains(files[file], unwanted) {
			t.Errorf("%s holds %q:\n%s", file, unwanted, files[file])
		}
	}
}

func TestScrubberKeepsFlagsAndNames(t *testing.T) {
	s := NewScrubber(nil)
	for in, want := range map[string]string{
		"automountServiceAccountToken: false":  "automountServiceAccountToken: false",
		"secretName: db-server-tls":            "secretName: db-server-tls",
		"rootCredentialsSecretRef:\n  name: x": "rootCredentialsSecretRef:\n  name: x",
		"AWS_SECRET_ACCESS_KEY=abc":            "AWS_SECRET_ACCESS_KEY=REDACTED",
		"--auth-token=simple,ttl=5":            "--auth-token=REDACTED,ttl=5",
	} {
		if got := s.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
