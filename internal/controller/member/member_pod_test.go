package member

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

func TestPodReadinessNamesAnImageThatCannotBePulled(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Image: "quay.io/coreos/etcd:v3.5.0",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}},
	}}}}
	got := podReadiness(pod)
	if got.Reason != etcdv1.ReasonImagePullFailed || !strings.Contains(got.Message, "quay.io/coreos/etcd:v3.5.0") || !strings.Contains(got.Message, "spec.version") {
		t.Fatalf("%+v", got)
	}
}

func TestVolumeProblemNamesAMissingStorageClass(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = etcdv1.AddToScheme(scheme)
	pvc := func(name, class string, phase corev1.PersistentVolumeClaimPhase) client.Object {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &class},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
		}
	}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		pvc("missing-1", "nope", corev1.ClaimPending),
		pvc("present-1", "local", corev1.ClaimPending),
		pvc("bound-1", "nope", corev1.ClaimBound),
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}},
	).Build()
	r := &Reconciler{Client: api}
	for name, want := range map[string]string{"missing-1": "StorageClassNotFound", "present-1": "", "bound-1": "", "gone-1": ""} {
		m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
		why, err := r.volumeProblem(context.Background(), m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch {
		case want == "" && why != nil:
			t.Errorf("%s: unexpected problem %+v", name, why)
		case want != "" && (why == nil || why.Reason != want || !strings.Contains(why.Message, `StorageClass "nope" does not exist`)):
			t.Errorf("%s: %+v, want reason %s naming the class", name, why, want)
		}
	}
}

func TestPodReadinessSaysWhyACrashLoopingMemberExits(t *testing.T) {
	pod := func(reason string, code int32, message string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, Message: message}},
		}}}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{pod("OOMKilled", 137, ""), "last exit: OOMKilled, code 137"},
		{pod("Error", 1, "{\"level\":\"info\",\"msg\":\"x\"}\n{\"level\":\"fatal\",\"ts\":\"2026\",\"msg\":\"error verifying flags\",\"error\":\"unknown flag\"}\n"),
			"last exit: Error, code 1: error verifying flags: unknown flag"},
		{pod("Error", 2, "panic: boom"), "last exit: Error, code 2: panic: boom"},
	} {
		got := podReadiness(tc.pod)
		if got.Reason != "CrashLoopBackOff" || !strings.HasSuffix(got.Message, tc.want) || strings.Contains(got.Message, "2026") {
			t.Errorf("%+v, want a message ending in %q", got, tc.want)
		}
	}
}

// A member Pod that cannot start under its template is replaced once the member would get
// another Pod; one that serves, is starting, or fails for its data stays, and so does every
// Pod of the current template.
func TestAPodThatCannotStartIsReplacedWhenItsTemplateChanges(t *testing.T) {
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	exited := func(message string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: message}
	}
	unschedulable := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	badFlag := `{"level":"fatal","msg":"error verifying flags","error":"unknown flag"}`
	for _, tc := range []struct {
		name       string
		node       string
		conditions []corev1.PodCondition
		init       []corev1.ContainerStatus
		status     *corev1.ContainerStatus
		memory     bool // tmpfs: the Pod holds the member's data
		current    bool // the Pod is of the template the member would get now
		want       string
	}{
		{name: "unschedulable", conditions: unschedulable, want: "which no node could take"},
		{name: "unschedulable, current", conditions: unschedulable, current: true},
		{name: "not judged by the scheduler yet"},
		{name: "image not pulled", node: "n", status: &corev1.ContainerStatus{State: waiting("ErrImagePull")}, want: "in which etcd never ran (ErrImagePull)"},
		{name: "image pull back-off", node: "n", status: &corev1.ContainerStatus{State: waiting("ImagePullBackOff")}, want: "in which etcd never ran (ImagePullBackOff)"},
		{name: "image not pulled, current", node: "n", status: &corev1.ContainerStatus{State: waiting("ImagePullBackOff")}, current: true},
		{name: "image not pulled, tmpfs (it holds nothing)", node: "n", memory: true, status: &corev1.ContainerStatus{State: waiting("ImagePullBackOff")}, want: "in which etcd never ran (ImagePullBackOff)"},
		{name: "config error", node: "n", status: &corev1.ContainerStatus{State: waiting("CreateContainerConfigError")}, want: "in which etcd never ran (CreateContainerConfigError)"},
		{name: "being created", node: "n", status: &corev1.ContainerStatus{State: waiting("ContainerCreating")}},
		{name: "kubelet said nothing yet", node: "n"},
		{name: "running, not ready yet", node: "n", status: &corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		{name: "ready", node: "n", conditions: ready, status: &corev1.ContainerStatus{Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		{name: "image pull failing after runs (it ran, and may have been Ready)", node: "n", status: &corev1.ContainerStatus{RestartCount: 2, State: waiting("ImagePullBackOff"), LastTerminationState: corev1.ContainerState{Terminated: exited("")}}},
		{name: "crash loop", node: "n", status: &corev1.ContainerStatus{RestartCount: 3, State: waiting("CrashLoopBackOff"), LastTerminationState: corev1.ContainerState{Terminated: exited(badFlag)}}, want: "in which etcd crash-loops"},
		{name: "crash loop, current", node: "n", current: true, status: &corev1.ContainerStatus{RestartCount: 3, State: waiting("CrashLoopBackOff"), LastTerminationState: corev1.ContainerState{Terminated: exited(badFlag)}}},
		{name: "crash loop on a data error (the cluster controller's)", node: "n", status: &corev1.ContainerStatus{RestartCount: 3, State: waiting("CrashLoopBackOff"), LastTerminationState: corev1.ContainerState{Terminated: exited(`{"msg":"failed to open wal"}`)}}},
		{name: "crash loop, tmpfs (its data is in the Pod)", node: "n", memory: true, status: &corev1.ContainerStatus{RestartCount: 3, State: waiting("CrashLoopBackOff"), LastTerminationState: corev1.ContainerState{Terminated: exited(badFlag)}}},
		{name: "restore init container crash-loops", node: "n", init: []corev1.ContainerStatus{{RestartCount: 2, State: waiting("CrashLoopBackOff")}},
			status: &corev1.ContainerStatus{State: waiting("PodInitializing")}, want: "in which etcd never ran (CrashLoopBackOff)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{etcdv1.AnnotationPodTemplateHash: "new"}}}
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{etcdv1.AnnotationPodTemplateHash: "old"}},
				Spec:       corev1.PodSpec{NodeName: tc.node},
				Status:     corev1.PodStatus{Conditions: tc.conditions, InitContainerStatuses: tc.init},
			}
			if tc.status != nil {
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{*tc.status}
			}
			if tc.current {
				pod.Annotations[etcdv1.AnnotationPodTemplateHash] = "new"
			}
			if got := stuckAndOutdated(pod, want, tc.memory); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// The member controller raises a bound PVC's request to the member's size, never lowers it,
// and leaves an unbound claim alone (the apiserver refuses changes to it).
func TestGrowPVC(t *testing.T) {
	for _, tc := range []struct {
		name, member, request string
		phase                 corev1.PersistentVolumeClaimPhase
		want                  string
	}{
		{"grows a bound claim", "2Gi", "1Gi", corev1.ClaimBound, "2Gi"},
		{"never shrinks", "1Gi", "2Gi", corev1.ClaimBound, "2Gi"},
		{"leaves an unbound claim", "2Gi", "1Gi", corev1.ClaimPending, "1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size := resource.MustParse(tc.member)
			m := &etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns"}, Spec: etcdv1.EtcdMemberSpec{Storage: etcdv1.StorageSpec{Size: &size}}}
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns"},
				Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(tc.request)}}},
				Status: corev1.PersistentVolumeClaimStatus{Phase: tc.phase},
			}
			scheme := runtime.NewScheme()
			_ = clientgoscheme.AddToScheme(scheme)
			_ = etcdv1.AddToScheme(scheme)
			r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(m, pvc).Build()}
			if _, err := r.growPVC(context.Background(), m, pvc.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			got := &corev1.PersistentVolumeClaim{}
			if err := r.Get(context.Background(), client.ObjectKeyFromObject(pvc), got); err != nil {
				t.Fatal(err)
			}
			if q := got.Spec.Resources.Requests[corev1.ResourceStorage]; q.Cmp(resource.MustParse(tc.want)) != 0 {
				t.Errorf("request %s, want %s", q.String(), tc.want)
			}
		})
	}
}

// A learner etcd has just added, whose first Pod is made while etcd cannot say whether it
// joined (the survivor of a quorum-loss recovery restarting, or the cluster counted silent),
// starts with its peers named: named alone it could never join. One that had a Pod before is
// held to its data, as every member etcd may count on.
func TestANewLearnerStartsWithItsPeersWhenEtcdCannotBeAsked(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hadPod    bool
		joined    bool
		wantAlone bool
	}{
		{"never had a Pod", false, false, false},
		{"had a Pod before", true, false, true},
		// It ran and published, lost its data, and its Pod went: etcd may count it as a
		// voter already (promoted, the promotion not yet in status.role).
		{"ran, its Pod gone since", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newMemberHarness(t, "")
			ctx := context.Background()
			added, _, err := h.etcd.AddLearner(ctx, []string{specs.PeerURL(h.cluster, "db-4")})
			if err != nil {
				t.Fatal(err)
			}
			m := &etcdv1.EtcdMember{
				ObjectMeta: metav1.ObjectMeta{Name: "db-4", Namespace: "ns", UID: "db-4-uid", Labels: specs.MemberLabels("db", "db-4"), Finalizers: []string{etcdv1.FinalizerMember}},
				Spec: etcdv1.EtcdMemberSpec{ClusterName: "db", Version: "3.6.16", Storage: h.cluster.Spec.Storage, Bootstrap: etcdv1.MemberBootstrap{
					InitialCluster: specs.InitialCluster(h.cluster, []string{"db-1", "db-2", "db-3", "db-4"}), InitialClusterState: etcdv1.InitialClusterStateExisting,
				}},
			}
			if err := h.api.Create(ctx, m); err != nil {
				t.Fatal(err)
			}
			m.Status = etcdv1.EtcdMemberStatus{MemberID: added.IDHex(), Role: etcdv1.RoleLearner}
			if tc.hadPod {
				m.Status.PodName = "db-4"
			}
			m.Status.Joined = tc.joined
			if err := h.api.Status().Update(ctx, m); err != nil {
				t.Fatal(err)
			}
			pvc := specs.PVC(h.cluster, m)
			pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "etcd-operator.cozystack.io/v1alpha2", Kind: "EtcdMember", Name: "db-4", UID: m.UID, Controller: ptrTo(true)}}
			if err := h.api.Create(ctx, pvc); err != nil {
				t.Fatal(err)
			}
			h.etcd.FailNext("MemberList", errors.New("no quorum"))
			h.reconcile("db-4")
			pod := get(h, "db-4", &corev1.Pod{})
			if pod == nil {
				t.Fatal("no Pod for db-4")
			}
			alone := specs.InitialClusterOf(pod) == specs.InitialCluster(h.cluster, []string{"db-4"})
			if alone != tc.wantAlone {
				t.Fatalf("initial cluster %q: named alone %t, want %t", specs.InitialClusterOf(pod), alone, tc.wantAlone)
			}
		})
	}
}

// mustHaveData decides whether a member's new Pod refuses an empty data directory: always
// once etcd says, or the status records, that it started; when etcd cannot be asked, for
// every member but a learner that never ran.
func TestMustHaveData(t *testing.T) {
	unknown := errors.New("etcd cannot be asked")
	for _, tc := range []struct {
		name    string
		status  etcdv1.EtcdMemberStatus
		joined  bool
		askErr  error
		require bool
	}{
		{"etcd says it joined", etcdv1.EtcdMemberStatus{Role: etcdv1.RoleVoter}, true, nil, true},
		{"etcd says a new learner did not join", etcdv1.EtcdMemberStatus{Role: etcdv1.RoleLearner}, false, nil, false},
		{"unknown, a voter", etcdv1.EtcdMemberStatus{Role: etcdv1.RoleVoter}, false, unknown, true},
		{"unknown, a learner that had a Pod", etcdv1.EtcdMemberStatus{Role: etcdv1.RoleLearner, PodName: "db-4"}, false, unknown, true},
		{"unknown, a learner that never had a Pod", etcdv1.EtcdMemberStatus{Role: etcdv1.RoleLearner}, false, unknown, false},
		{"unknown, a learner that ran, its Pod gone since", etcdv1.EtcdMemberStatus{Role: etcdv1.RoleLearner, Joined: true}, false, unknown, true},
		{"recorded as joined, etcd answering otherwise", etcdv1.EtcdMemberStatus{Role: etcdv1.RoleLearner, Joined: true}, false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &etcdv1.EtcdMember{Status: tc.status}
			if got := mustHaveData(m, tc.joined, tc.askErr); got != tc.require {
				t.Fatalf("mustHaveData = %t, want %t", got, tc.require)
			}
		})
	}
}
