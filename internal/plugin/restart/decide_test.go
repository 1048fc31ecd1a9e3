package restart

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// healthy is a three-member cluster at rest: every member Ready, Available, not Degraded, not
// Progressing, the spec observed, every member at spec.version. Each Pod's UID is "<name>-old".
func healthy() (*etcdv1.EtcdCluster, []etcdv1.EtcdMember, map[string]corev1.Pod) {
	c := &etcdv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 4}}
	c.Spec.Version = "3.6.16"
	c.Status.ObservedGeneration, c.Status.Version = 4, "3.6.16"
	c.Status.Conditions = []metav1.Condition{
		{Type: etcdv1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: etcdv1.ReasonQuorumHealthy},
		{Type: etcdv1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: etcdv1.ReasonAllMembersHealthy},
		{Type: etcdv1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: etcdv1.ReasonIdle},
	}
	var members []etcdv1.EtcdMember
	pods := map[string]corev1.Pod{}
	for _, name := range []string{"db-1", "db-2", "db-3"} {
		m := etcdv1.EtcdMember{ObjectMeta: metav1.ObjectMeta{Name: name}}
		m.Spec.Version = "3.6.16"
		m.Status.Conditions = []metav1.Condition{{Type: etcdv1.MemberConditionReady, Status: metav1.ConditionTrue}}
		members = append(members, m)
		pods[name] = readyPod(name, name+"-old")
	}
	return c, members, pods
}

func readyPod(name, uid string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

func setCondition(c *etcdv1.EtcdCluster, typ string, status metav1.ConditionStatus, reason string) {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == typ {
			c.Status.Conditions[i].Status, c.Status.Conditions[i].Reason = status, reason
		}
	}
}

func TestRefusalNamesWhatToWaitFor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*etcdv1.EtcdCluster, []etcdv1.EtcdMember, map[string]corev1.Pod) []etcdv1.EtcdMember
		refuse string
	}{
		{"healthy and at rest", nil, ""},
		{"at rest, spec.version written with a v", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			c.Spec.Version = "v" + c.Spec.Version
			return m
		}, ""},
		{"paused", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			c.Spec.Replicas = new(int32)
			return m
		}, "kubectl etcd resume db"},
		{"suspended", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			c.Annotations = map[string]string{etcdv1.AnnotationSuspendReconcile: "true"}
			return m
		}, "remove the annotation"},
		{"a roll under way", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			setCondition(c, etcdv1.ConditionProgressing, metav1.ConditionTrue, etcdv1.ReasonRollingUpdate)
			return m
		}, "already restarting members"},
		{"spec not observed yet", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			c.Generation = 5
			return m
		}, "status.observedGeneration"},
		{"mid-scale: a member more than spec.replicas", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			two := int32(2)
			c.Spec.Replicas = &two
			return m
		}, "mid-scale"},
		{"mid-scale: a learner", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			c.Status.Learners = 1
			return m
		}, "mid-scale"},
		{"mid-upgrade: a member at another version", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			m[1].Spec.Version = "3.5.35"
			return m
		}, "mid-upgrade to 3.6.16"},
		{"mid-upgrade: status.version behind", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			c.Status.Version = "3.5.35"
			return m
		}, "wait until status.version is 3.6.16"},
		{"the operator changing something else", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			setCondition(c, etcdv1.ConditionProgressing, metav1.ConditionTrue, etcdv1.ReasonQuorumRecovery)
			return m
		}, "wait until Progressing is False"},
		{"not available", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			setCondition(c, etcdv1.ConditionAvailable, metav1.ConditionFalse, etcdv1.ReasonQuorumLost)
			return m
		}, "wait until Available is True"},
		{"degraded", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			setCondition(c, etcdv1.ConditionDegraded, metav1.ConditionTrue, etcdv1.ReasonMembersUnhealthy)
			return m
		}, "wait until Degraded is False"},
		{"a Pod not Ready", func(_ *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, pods map[string]corev1.Pod) []etcdv1.EtcdMember {
			p := pods["db-2"]
			p.Status.Conditions = nil
			pods["db-2"] = p
			return m
		}, "db-2 (Pod not Ready)"},
		{"a Pod missing", func(_ *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, pods map[string]corev1.Pod) []etcdv1.EtcdMember {
			delete(pods, "db-3")
			return m
		}, "db-3 (no Pod)"},
		{"a member failing etcd's health check", func(_ *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			m[0].Status.Conditions[0].Status = metav1.ConditionFalse
			return m
		}, "db-1 (etcd health check failing)"},
		{"the only member on tmpfs", func(c *etcdv1.EtcdCluster, m []etcdv1.EtcdMember, _ map[string]corev1.Pod) []etcdv1.EtcdMember {
			one := int32(1)
			c.Spec.Replicas, c.Spec.Storage.Medium = &one, etcdv1.StorageMediumMemory
			return m[:1]
		}, "scale to 3 first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, members, pods := healthy()
			if tc.edit != nil {
				members = tc.edit(c, members, pods)
			}
			err := refusal(c, members, pods)
			if tc.refuse == "" && err != nil || tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)) {
				t.Errorf("refusal = %v; want %q", err, tc.refuse)
			}
		})
	}
}

func TestProgressCountsMembersBackOnNewPods(t *testing.T) {
	c, members, pods := healthy()
	before := podUIDs(pods)
	rolling := func(c *etcdv1.EtcdCluster) {
		setCondition(c, etcdv1.ConditionProgressing, metav1.ConditionTrue, etcdv1.ReasonRollingUpdate)
	}
	for _, tc := range []struct {
		name          string
		edit          func(*etcdv1.EtcdCluster, map[string]corev1.Pod)
		members       []etcdv1.EtcdMember
		back, waiting []string
		done          bool
	}{
		{"nothing restarted yet", func(*etcdv1.EtcdCluster, map[string]corev1.Pod) {}, members, nil, []string{"db-1", "db-2", "db-3"}, false},
		{"a follower back", func(c *etcdv1.EtcdCluster, p map[string]corev1.Pod) {
			rolling(c)
			p["db-2"] = readyPod("db-2", "db-2-new")
		}, members, []string{"db-2"}, []string{"db-1", "db-3"}, false},
		{"a new Pod not Ready yet", func(c *etcdv1.EtcdCluster, p map[string]corev1.Pod) {
			rolling(c)
			p["db-2"] = corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-2", UID: "db-2-new"}}
		}, members, nil, []string{"db-1", "db-2", "db-3"}, false},
		{"all back, the operator not at rest yet", func(c *etcdv1.EtcdCluster, p map[string]corev1.Pod) {
			rolling(c)
			for _, n := range []string{"db-1", "db-2", "db-3"} {
				p[n] = readyPod(n, n+"-new")
			}
		}, members, []string{"db-1", "db-2", "db-3"}, nil, false},
		{"all back and at rest", func(_ *etcdv1.EtcdCluster, p map[string]corev1.Pod) {
			for _, n := range []string{"db-1", "db-2", "db-3"} {
				p[n] = readyPod(n, n+"-new")
			}
		}, members, []string{"db-1", "db-2", "db-3"}, nil, true},
		{"a tmpfs member replaced under a new name", func(_ *etcdv1.EtcdCluster, p map[string]corev1.Pod) {
			delete(p, "db-1")
			p["db-4"] = readyPod("db-4", "db-4-new")
			p["db-2"], p["db-3"] = readyPod("db-2", "db-2-new"), readyPod("db-3", "db-3-new")
		}, append(append([]etcdv1.EtcdMember{}, members[1:]...), renamed(members[0], "db-4")), []string{"db-2", "db-3", "db-4"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := c.DeepCopy()
			p := map[string]corev1.Pod{}
			for k, v := range pods {
				p[k] = v
			}
			tc.edit(c, p)
			st := progress(before, c, tc.members, p)
			if !slices.Equal(st.Back, tc.back) || !slices.Equal(st.Waiting, tc.waiting) || st.Done != tc.done {
				t.Errorf("progress = %+v; want back %v, waiting %v, done %t", st, tc.back, tc.waiting, tc.done)
			}
		})
	}
}

func renamed(m etcdv1.EtcdMember, name string) etcdv1.EtcdMember {
	m = *m.DeepCopy()
	m.Name = name
	return m
}
