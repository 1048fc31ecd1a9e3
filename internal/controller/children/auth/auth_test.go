package auth

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller/children/childtest"
	"github.com/quorumkeeper/etcd-operator/internal/etcdaccess"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// withAuth is a cluster that is to have auth with root's password in Secret "root", on since
// before if enabled.
func withAuth(enabled bool) *etcdv1.EtcdCluster {
	c := childtest.Cluster()
	c.Spec.Auth = &etcdv1.AuthSpec{Enabled: true, RootCredentialsSecretRef: &corev1.LocalObjectReference{Name: "root"}}
	c.Status.AuthEnabled = enabled
	return c
}

func rootSecret(password string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: "ns"}, Data: map[string][]byte{etcdaccess.RootPasswordKey: []byte(password)}}
}

// component is the auth component over cl and the recorder of its events.
func component(cl client.Client) (*Component, *events.FakeRecorder) {
	rec := events.NewFakeRecorder(20)
	return New(childtest.Objects(cl), rec), rec
}

func expectAuthReady(t *testing.T, cl client.Client, status metav1.ConditionStatus, reason, want string) {
	t.Helper()
	cond := childtest.Condition(t, cl, etcdv1.ConditionAuthReady)
	if cond == nil || cond.Status != status || cond.Reason != reason || !strings.Contains(cond.Message, want) {
		t.Fatalf("AuthReady %+v, want %s/%s saying %q", cond, status, reason, want)
	}
}

// No member of a cluster that is to have auth while root's password cannot be read; once auth
// is on, the Secret no longer holds members back.
func TestSyncWaitsForRootsPasswordUntilAuthIsOn(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), withAuth(false)
	cl := childtest.Client(interceptor.Funcs{}, c)
	a, rec := component(cl)
	childtest.ExpectWait(t, a.Sync(ctx, c, false), etcdv1.ReasonSecretMissing)
	expectAuthReady(t, cl, metav1.ConditionFalse, etcdv1.ReasonSecretMissing, "Secret root, named by spec.auth.rootCredentialsSecretRef, does not exist")
	if evs := childtest.Events(rec); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning SecretMissing Secret root") {
		t.Fatalf("events %q, want one warning about Secret root", evs)
	}

	on := withAuth(true)
	if err := a.Sync(ctx, on, false); err != nil {
		t.Fatalf("auth is on, the Secret held members back: %v", err)
	}
	if err := cl.Create(ctx, rootSecret("Pa55word")); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(ctx, c, false); err != nil {
		t.Fatalf("the password is readable: %v", err)
	}
}

// A login etcd refused is reported on AuthReady, and only for a cluster that is to have auth.
func TestSyncReportsALoginEtcdRefused(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), withAuth(true)
	cl := childtest.Client(interceptor.Funcs{}, c, rootSecret("Pa55word"))
	a, _ := component(cl)
	if err := a.Sync(ctx, c, false); err != nil || childtest.Condition(t, cl, etcdv1.ConditionAuthReady) != nil {
		t.Fatalf("nothing refused: %v, AuthReady %+v", err, childtest.Condition(t, cl, etcdv1.ConditionAuthReady))
	}
	if err := a.Sync(ctx, c, true); err != nil {
		t.Fatal(err)
	}
	expectAuthReady(t, cl, metav1.ConditionFalse, etcdv1.ReasonAuthFailed, "set the Secret's password to root's current password")

	plain := childtest.Cluster()
	plainClient := childtest.Client(interceptor.Funcs{}, plain)
	b, _ := component(plainClient)
	if err := b.Sync(ctx, plain, true); err != nil || childtest.Condition(t, plainClient, etcdv1.ConditionAuthReady) != nil {
		t.Fatalf("a cluster without auth: %v", err)
	}
}

// The applied password's Secret is the cluster's, written only when the password differs,
// and never one of that name that is someone else's.
func TestRecordApplied(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), withAuth(false)
	cl := childtest.Client(interceptor.Funcs{}, c)
	a, _ := component(cl)
	applied := func() *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		if err := childtest.Get(cl, specs.RootAppliedSecretName("db"), s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := a.RecordApplied(ctx, c, "first"); err != nil {
		t.Fatal(err)
	}
	s := applied()
	if !metav1.IsControlledBy(s, c) || string(s.Data[etcdaccess.RootPasswordKey]) != "first" || s.Labels[etcdv1.LabelCluster] != "db" {
		t.Fatalf("applied-password Secret %+v", s.ObjectMeta)
	}
	if err := a.RecordApplied(ctx, c, "first"); err != nil || applied().ResourceVersion != s.ResourceVersion {
		t.Fatalf("the same password written again: %v", err)
	}
	if err := a.RecordApplied(ctx, c, "second"); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Applied(ctx, c); err != nil || got != "second" {
		t.Fatalf("applied password %q, %v; want the second", got, err)
	}

	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: specs.RootAppliedSecretName("db"), Namespace: "ns"}}
	b, _ := component(childtest.Client(interceptor.Funcs{}, c, foreign))
	childtest.ExpectProblem(t, b.RecordApplied(ctx, c, "first"), etcdv1.ReasonNameConflict)
}

// Enabling is recorded in the status and on AuthReady; users and roles the operator did not
// create are named there, with one warning while the list stays the same.
func TestMarkEnabled(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), withAuth(false)
	cl := childtest.Client(interceptor.Funcs{}, c)
	a, rec := component(cl)
	if err := a.MarkEnabled(ctx, c, ""); err != nil {
		t.Fatal(err)
	}
	stored := &etcdv1.EtcdCluster{}
	if err := childtest.Get(cl, "db", stored); err != nil || !stored.Status.AuthEnabled {
		t.Fatalf("status.authEnabled not recorded: %v", err)
	}
	expectAuthReady(t, cl, metav1.ConditionTrue, etcdv1.ReasonAuthEnabled, "root's password is the one in Secret root")
	childtest.Events(rec)

	note := "; users the operator did not create: [app], roles: []"
	for range 2 {
		if err := a.MarkEnabled(ctx, c, note); err != nil {
			t.Fatal(err)
		}
	}
	expectAuthReady(t, cl, metav1.ConditionTrue, etcdv1.ReasonAuthEnabled, note)
	warnings := 0
	for _, e := range childtest.Events(rec) {
		if strings.HasPrefix(e, "Warning "+etcdv1.ReasonUnmanagedUsersOrRoles+" users the operator did not create: [app]") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("%d warnings about the same users, want one", warnings)
	}
}

func TestPending(t *testing.T) {
	t.Parallel()
	if !Pending(withAuth(false)) || Pending(withAuth(true)) || Pending(childtest.Cluster()) {
		t.Fatal("Pending is for a cluster that is to have auth and has not got it yet")
	}
}

// The applied-password Secret carries the cluster's spec.additionalMetadata.
func TestRecordAppliedCarriesAdditionalMetadata(t *testing.T) {
	t.Parallel()
	ctx, c := context.Background(), withAuth(false)
	c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{Labels: map[string]string{"team": "storage"}, Annotations: map[string]string{"owner": "team-a"}}
	cl := childtest.Client(interceptor.Funcs{}, c)
	a, _ := component(cl)
	if err := a.RecordApplied(ctx, c, "first"); err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{}
	if err := childtest.Get(cl, specs.RootAppliedSecretName("db"), s); err != nil {
		t.Fatal(err)
	}
	if s.Labels["team"] != "storage" || s.Annotations["owner"] != "team-a" || s.Labels[etcdv1.LabelCluster] != "db" {
		t.Fatalf("applied-password Secret %+v", s.ObjectMeta)
	}
}
