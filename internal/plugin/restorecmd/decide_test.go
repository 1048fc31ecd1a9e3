package restorecmd

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		rev  int64
		at   string // RFC 3339 in UTC
		fail string
	}{
		{in: "1431000", rev: 1431000},
		{in: "2026-12-02T10:15:00Z", at: "2026-12-02T10:15:00Z"},
		{in: "2026-12-02T11:15:00+01:00", at: "2026-12-02T10:15:00Z"},
		{in: "0", fail: "at least 1"},
		{in: "-3", fail: "at least 1"},
		{in: "yesterday", fail: "neither a revision nor an RFC 3339 time"},
		{in: "2026-12-02 10:15", fail: "neither a revision nor an RFC 3339 time"},
		{in: "2026-12-02T10:15:00.5Z", fail: "whole second"},
	} {
		got, err := ParseTarget(tc.in)
		switch {
		case tc.fail != "":
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("%q: %+v %v, want an error saying %q", tc.in, got, err, tc.fail)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.rev != 0 && (got.Revision == nil || *got.Revision != tc.rev || got.Time != nil):
			t.Errorf("%q: %+v, want revision %d", tc.in, got, tc.rev)
		case tc.at != "" && (got.Time == nil || got.Time.UTC().Format(time.RFC3339) != tc.at || got.Revision != nil):
			t.Errorf("%q: %+v, want %s", tc.in, got, tc.at)
		}
	}
}

func windowed(archive bool) *etcdv1.EtcdSnapshotSchedule {
	sc := &etcdv1.EtcdSnapshotSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}}
	if archive {
		sc.Spec.Archive = &etcdv1.SnapshotArchive{}
		t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
		sc.Status.Archive = &etcdv1.ArchiveStatus{Window: &etcdv1.RestoreWindow{
			Earliest: etcdv1.RestorePoint{Revision: 100, Time: &metav1.Time{Time: t0}},
			Latest:   etcdv1.RestorePoint{Revision: 500, Time: &metav1.Time{Time: t0.Add(7 * time.Hour)}}}}
	}
	return sc
}

func TestCheckWindow(t *testing.T) {
	noWindow := windowed(true)
	noWindow.Status.Archive = nil
	for _, tc := range []struct {
		name       string
		sc         *etcdv1.EtcdSnapshotSchedule
		to         string
		fail, wait string
	}{
		{"inside, revision", windowed(true), "300", "", ""},
		{"inside, time", windowed(true), "2026-12-02T05:00:00Z", "", ""},
		{"before, revision", windowed(true), "99", "before the window", ""},
		{"before, time", windowed(true), "2026-12-02T02:59:59Z", "before the window", ""},
		{"after, revision", windowed(true), "501", "", "waits until the archive reaches it"},
		{"after, time", windowed(true), "2026-12-02T10:00:01Z", "", "waits until the archive reaches it"},
		{"no archive", windowed(false), "300", "has no spec.archive", ""},
		{"no window", noWindow, "300", "no window yet", ""},
	} {
		target, err := ParseTarget(tc.to)
		if err != nil {
			t.Fatal(err)
		}
		wait, err := CheckWindow(tc.sc, target)
		if tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)) || tc.fail == "" && err != nil {
			t.Errorf("%s: %v, want failure %q", tc.name, err, tc.fail)
		}
		if tc.wait != "" && !strings.Contains(wait, tc.wait) || tc.wait == "" && wait != "" {
			t.Errorf("%s: wait %q, want %q", tc.name, wait, tc.wait)
		}
	}
}

// The new cluster takes what describes the source cluster, not what names it: its TLS from
// cert-manager is kept, its own TLS Secrets refuse; --replicas and --version win; without a
// source a version is needed.
func TestRestoredCluster(t *testing.T) {
	target, _ := ParseTarget("2026-12-02T10:15:00Z")
	src := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: "ns"}, Spec: etcdv1.EtcdClusterSpec{
		Replicas: ptr(int32(3)), Version: "3.6.16", Storage: etcdv1.StorageSpec{StorageClassName: ptr("fast")},
		Auth:         &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "root"}},
		TLS:          &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{CertManager: &etcdv1.ClientCertManager{}}},
		NodeSelector: map[string]string{"disk": "ssd"}, PriorityClassName: "etcd",
		Affinity: &corev1.Affinity{}, NetworkPolicy: &etcdv1.NetworkPolicySpec{},
	}}
	c, err := RestoredCluster(src, "ns", "example-back", "nightly", "", 0, target)
	if err != nil {
		t.Fatal(err)
	}
	if why := checkCopied(c, target); why != "" {
		t.Error(why)
	}
	if c, err := RestoredCluster(src, "ns", "x", "nightly", "3.6.17", 1, target); err != nil || *c.Spec.Replicas != 1 || c.Spec.Version != "3.6.17" {
		t.Errorf("with --replicas and --version: %+v %v", c, err)
	}
	own := src.DeepCopy()
	own.Spec.TLS = &etcdv1.EtcdClusterTLS{Client: &etcdv1.ClientTLS{ServerSecretRef: &corev1.LocalObjectReference{Name: "example-server"}}}
	if _, err := RestoredCluster(own, "ns", "x", "nightly", "", 0, target); !errors.Is(err, ErrOwnTLSSecrets) {
		t.Errorf("own TLS Secrets: %v", err)
	}
	if _, err := RestoredCluster(nil, "ns", "x", "nightly", "", 3, target); err == nil {
		t.Error("no source and no version: created")
	}
	if c, err := RestoredCluster(nil, "ns", "x", "nightly", "3.6.16", 3, target); err != nil || *c.Spec.Replicas != 3 {
		t.Errorf("no source: %+v %v", c, err)
	}
}

// checkCopied says what is wrong with the cluster TestRestoredCluster makes from its source.
func checkCopied(c *etcdv1.EtcdCluster, target etcdv1.RestoreTarget) string {
	s := c.Spec
	if c.Name != "example-back" || *s.Replicas != 3 || s.Version != "3.6.16" || *s.Storage.StorageClassName != "fast" || s.Auth.RootCredentialsSecretRef.Name != "root" ||
		s.TLS == nil || s.NodeSelector["disk"] != "ssd" || s.PriorityClassName != "etcd" || s.Affinity != nil || s.NetworkPolicy != nil {
		return fmt.Sprintf("spec %+v", s)
	}
	if r := s.Bootstrap.Restore; r.Source.ScheduleRef.Name != "nightly" || !r.Target.Time.Equal(target.Time) {
		return fmt.Sprintf("bootstrap %+v", r)
	}
	return ""
}

func ptr[T any](v T) *T { return &v }
