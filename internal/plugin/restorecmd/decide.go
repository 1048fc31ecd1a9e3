// Package restorecmd is `kubectl etcd restore`: a new cluster restored from a schedule's
// snapshots and archive to a revision or a time.
package restorecmd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// ParseTarget reads --to: a revision (a positive integer) or an RFC 3339 time, which the API
// keeps to the second: a time with a fraction is refused rather than moved.
func ParseTarget(s string) (etcdv1.RestoreTarget, error) {
	s = strings.TrimSpace(s)
	if rev, err := strconv.ParseInt(s, 10, 64); err == nil {
		if rev < 1 {
			return etcdv1.RestoreTarget{}, fmt.Errorf("--to %s: a revision is at least 1", s)
		}
		return etcdv1.RestoreTarget{Revision: &rev}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return etcdv1.RestoreTarget{}, fmt.Errorf("--to %q is neither a revision nor an RFC 3339 time such as 2026-12-02T10:15:00Z", s)
	}
	if t.Nanosecond() != 0 {
		return etcdv1.RestoreTarget{}, fmt.Errorf("--to %s: spec.bootstrap.restore.target.time is kept to the second; give a whole second", s)
	}
	return etcdv1.RestoreTarget{Time: &metav1.Time{Time: t.UTC()}}, nil
}

// CheckWindow refuses a target the schedule's archive can never reach (no archive, or before
// its window), and says when the restore will wait for the archive to reach it.
func CheckWindow(sc *etcdv1.EtcdSnapshotSchedule, target etcdv1.RestoreTarget) (wait string, err error) {
	if sc.Spec.Archive == nil {
		return "", fmt.Errorf("EtcdSnapshotSchedule %s has no spec.archive: it can restore only its snapshots (spec.bootstrap.restore.source.snapshotRef)", sc.Name)
	}
	st := sc.Status.Archive
	if st == nil || st.Window == nil {
		return "", fmt.Errorf("EtcdSnapshotSchedule %s reports no window yet (condition Archived): nothing can be restored to a point yet", sc.Name)
	}
	w := st.Window
	switch {
	case target.Revision != nil && *target.Revision < w.Earliest.Revision,
		target.Time != nil && w.Earliest.Time != nil && target.Time.Before(w.Earliest.Time):
		return "", fmt.Errorf("%s is before the window of EtcdSnapshotSchedule %s, %s", describe(target), sc.Name, window(w))
	case target.Revision != nil && *target.Revision > w.Latest.Revision,
		target.Time != nil && (w.Latest.Time == nil || target.Time.After(w.Latest.Time.Time)):
		return fmt.Sprintf("%s is after the window of EtcdSnapshotSchedule %s, %s: the restore waits until the archive reaches it", describe(target), sc.Name, window(w)), nil
	}
	return "", nil
}

func describe(t etcdv1.RestoreTarget) string {
	if t.Revision != nil {
		return fmt.Sprintf("revision %d", *t.Revision)
	}
	return t.Time.UTC().Format(time.RFC3339)
}

func window(w *etcdv1.RestoreWindow) string {
	at := func(p etcdv1.RestorePoint) string {
		if p.Time == nil {
			return fmt.Sprintf("revision %d", p.Revision)
		}
		return fmt.Sprintf("revision %d (%s)", p.Revision, p.Time.UTC().Format(time.RFC3339))
	}
	return "which runs from " + at(w.Earliest) + " to " + at(w.Latest)
}

// ErrOwnTLSSecrets: the source cluster's TLS names Secrets of its own, whose certificates
// name its hosts, not the new cluster's.
var ErrOwnTLSSecrets = errors.New("the source cluster's spec.tls names Secrets of its own, whose certificates name its hosts")

// RestoredCluster is the new cluster name restored from schedule to target: the source
// cluster's spec where it describes the cluster rather than its name (version, replicas,
// storage, options, resources, auth, TLS from cert-manager, scheduling by node, pull
// secrets); replicas, when above 0, instead of the source's. Without a source (deleted)
// version is needed.
func RestoredCluster(src *etcdv1.EtcdCluster, namespace, name, schedule, version string, replicas int32, target etcdv1.RestoreTarget) (*etcdv1.EtcdCluster, error) {
	c := &etcdv1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: etcdv1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
	}
	if src != nil {
		s := src.Spec.DeepCopy()
		if tls := s.TLS; tls != nil && (tls.Client != nil && tls.Client.CertManager == nil || tls.Peer != nil && tls.Peer.CertManager == nil && !tls.Peer.AutoTLS) {
			return nil, fmt.Errorf("%w: print the cluster with --dry-run -o yaml, give it spec.tls of its own, and create it", ErrOwnTLSSecrets)
		}
		c.Spec = etcdv1.EtcdClusterSpec{Replicas: s.Replicas, Version: s.Version, Storage: s.Storage, TLS: s.TLS, Auth: s.Auth,
			Resources: s.Resources, Options: s.Options, ImagePullSecrets: s.ImagePullSecrets, Tolerations: s.Tolerations,
			NodeSelector: s.NodeSelector, PriorityClassName: s.PriorityClassName}
	}
	if version != "" {
		c.Spec.Version = version
	}
	if c.Spec.Version == "" {
		return nil, errors.New("the schedule's cluster is gone: give --version (and --replicas)")
	}
	if replicas > 0 {
		c.Spec.Replicas = &replicas
	}
	c.Spec.Bootstrap = &etcdv1.BootstrapSpec{Restore: &etcdv1.RestoreSpec{
		Source: etcdv1.RestoreSource{ScheduleRef: &corev1.LocalObjectReference{Name: schedule}}, Target: &target}}
	return c, nil
}
