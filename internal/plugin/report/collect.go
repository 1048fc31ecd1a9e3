package report

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/logs"
)

// Source is where a report reads from: the API server with the user's rights, the members'
// logs, and etcd itself.
type Source struct {
	Client    client.Client
	Scheme    *runtime.Scheme
	Namespace string
	Logs      logs.Opener
	// Etcd reads what the members say (file name -> value, written as JSON); nil or an
	// error when they cannot be reached, which the report records and goes on.
	Etcd func(ctx context.Context) (map[string]any, error)
	// Version is `kubectl etcd version`'s answer.
	Version any
}

// bundle is the report's files by name, before they are scrubbed and written.
type bundle struct {
	files map[string][]byte
	// problems are what could not be read, for README.txt.
	problems []string
	// names are the objects the report holds, for picking their events; members the
	// EtcdMembers among them, whose logs it reads.
	names   map[string]bool
	members []string
	// secrets are the names of the Secrets the objects refer to or that carry the cluster's
	// label; secretData their values, only to scrub them.
	secrets    map[string]bool
	secretData []map[string][]byte
}

func (b *bundle) problem(format string, args ...any) {
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// collect reads everything the report holds about the cluster.
func collect(ctx context.Context, src Source, cluster string) (*bundle, error) {
	b := &bundle{files: map[string][]byte{}, names: map[string]bool{}, secrets: map[string]bool{}}
	c := &etcdv1.EtcdCluster{}
	if err := src.Client.Get(ctx, types.NamespacedName{Namespace: src.Namespace, Name: cluster}, c); err != nil {
		return nil, cli.ExplainForbidden(err, "get etcdclusters.etcd-operator.cozystack.io")
	}
	if err := b.objects(src, "etcdcluster.yaml", c); err != nil {
		return nil, err
	}
	labelled := []client.ListOption{client.InNamespace(src.Namespace), client.MatchingLabels{etcdv1.LabelCluster: cluster}}
	inNamespace := []client.ListOption{client.InNamespace(src.Namespace)}
	for _, l := range []struct {
		file string
		list client.ObjectList
		opts []client.ListOption
		keep func(client.Object) bool
	}{
		{"etcdmembers.yaml", &etcdv1.EtcdMemberList{}, labelled, nil},
		{"etcdsnapshots.yaml", &etcdv1.EtcdSnapshotList{}, inNamespace, refersTo(cluster)},
		{"etcdsnapshotschedules.yaml", &etcdv1.EtcdSnapshotScheduleList{}, inNamespace, refersTo(cluster)},
		{"etcddefrags.yaml", &etcdv1.EtcdDefragList{}, inNamespace, refersTo(cluster)},
		{"etcddefragpolicies.yaml", &etcdv1.EtcdDefragPolicyList{}, inNamespace, refersTo(cluster)},
		{"pods.yaml", &corev1.PodList{}, labelled, nil},
		{"pvcs.yaml", &corev1.PersistentVolumeClaimList{}, labelled, nil},
		{"services.yaml", &corev1.ServiceList{}, labelled, nil},
		{"poddisruptionbudgets.yaml", &policyv1.PodDisruptionBudgetList{}, labelled, nil},
	} {
		b.list(ctx, src, l.file, l.list, l.keep, l.opts...)
	}
	b.events(ctx, src)
	b.readSecrets(ctx, src, cluster)
	b.logs(ctx, src)
	b.etcd(ctx, src)
	b.json("version.json", src.Version)
	return b, nil
}

// refersTo keeps the objects whose spec.clusterRef names the cluster.
func refersTo(cluster string) func(client.Object) bool {
	return func(obj client.Object) bool {
		switch o := obj.(type) {
		case *etcdv1.EtcdSnapshot:
			return o.Spec.ClusterRef.Name == cluster
		case *etcdv1.EtcdSnapshotSchedule:
			return o.Spec.ClusterRef.Name == cluster
		case *etcdv1.EtcdDefrag:
			return o.Spec.ClusterRef.Name == cluster
		case *etcdv1.EtcdDefragPolicy:
			return o.Spec.ClusterRef.Name == cluster
		}
		return false
	}
}

// list reads one kind into file; what cannot be read (a kind not installed, no right) is a
// problem, not the report's end.
func (b *bundle) list(ctx context.Context, src Source, file string, list client.ObjectList, keep func(client.Object) bool, opts ...client.ListOption) {
	if err := src.Client.List(ctx, list, opts...); err != nil {
		b.problem("%s: %v", file, err)
		return
	}
	items, err := runtimeItems(list)
	if err != nil {
		b.problem("%s: %v", file, err)
		return
	}
	var kept []client.Object
	for _, obj := range items {
		if keep == nil || keep(obj) {
			kept = append(kept, obj)
		}
	}
	if err := b.objects(src, file, kept...); err != nil {
		b.problem("%s: %v", file, err)
	}
}

func runtimeItems(list client.ObjectList) ([]client.Object, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		co, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%T is no object", o)
		}
		out = append(out, co)
	}
	return out, nil
}

// objects writes objs to file as a kubectl List, each stripped (Object), and notes their
// names and the Secrets they refer to.
func (b *bundle) objects(src Source, file string, objs ...client.Object) error {
	items := make([]any, 0, len(objs))
	for _, obj := range objs {
		gvk, err := apiutil.GVKForObject(obj, src.Scheme)
		if err != nil {
			return err
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
		Object(u)
		secretNames(u["spec"], b.secrets)
		b.names[obj.GetName()] = true
		if _, ok := obj.(*etcdv1.EtcdMember); ok {
			b.members = append(b.members, obj.GetName())
		}
		items = append(items, u)
	}
	data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	b.files[file] = data
	return nil
}

// events are the namespace's events about the objects the report holds, oldest first.
func (b *bundle) events(ctx context.Context, src Source) {
	list := &corev1.EventList{}
	if err := src.Client.List(ctx, list, client.InNamespace(src.Namespace)); err != nil {
		b.problem("events.yaml: %v", err)
		return
	}
	var about []client.Object
	for i := range list.Items {
		if b.names[list.Items[i].InvolvedObject.Name] {
			about = append(about, &list.Items[i])
		}
	}
	sort.SliceStable(about, func(i, j int) bool {
		ti, tj := eventTime(about[i]), eventTime(about[j])
		return ti.Before(&tj)
	})
	if err := b.objects(src, "events.yaml", about...); err != nil {
		b.problem("events.yaml: %v", err)
	}
}

// readSecrets lists the names of the cluster's Secrets (those the objects refer to, and those
// with the cluster's label) into secrets.txt, and keeps their values only to scrub them.
func (b *bundle) readSecrets(ctx context.Context, src Source, cluster string) {
	labelled := &corev1.SecretList{}
	if err := src.Client.List(ctx, labelled, client.InNamespace(src.Namespace), client.MatchingLabels{etcdv1.LabelCluster: cluster}); err != nil {
		b.problem("Secrets labelled with the cluster could not be listed (their values are scrubbed by pattern only): %v", err)
	}
	for i := range labelled.Items {
		b.secrets[labelled.Items[i].Name] = true
		b.secretData = append(b.secretData, labelled.Items[i].Data)
	}
	names := make([]string, 0, len(b.secrets))
	for name := range b.secrets {
		names = append(names, name)
	}
	slices.Sort(names)
	var text strings.Builder
	text.WriteString("# The Secrets of the cluster, by name only: the report holds none of their data.\n")
	for _, name := range names {
		s := &corev1.Secret{}
		err := src.Client.Get(ctx, types.NamespacedName{Namespace: src.Namespace, Name: name}, s)
		switch {
		case err != nil:
			fmt.Fprintf(&text, "%s\t(not read: %v)\n", name, err)
		default:
			fmt.Fprintf(&text, "%s\t%s\n", name, s.Type)
			b.secretData = append(b.secretData, s.Data)
		}
	}
	b.files["secrets.txt"] = []byte(text.String())
}

// logs are each member's etcd log, of the running container and of the one before it.
func (b *bundle) logs(ctx context.Context, src Source) {
	if src.Logs == nil {
		return
	}
	for _, name := range b.members {
		for _, previous := range []bool{false, true} {
			file := "logs/" + name + ".log"
			if previous {
				file = "logs/" + name + ".previous.log"
			}
			data, err := logs.Read(ctx, src.Logs, name, previous)
			if err != nil {
				b.files[file+".error.txt"] = []byte(err.Error() + "\n")
				continue
			}
			b.files[file] = data
		}
	}
}

// etcd records what the members say, or why they could not be asked.
func (b *bundle) etcd(ctx context.Context, src Source) {
	if src.Etcd == nil {
		return
	}
	files, err := src.Etcd(ctx)
	if err != nil {
		b.files["etcd/error.txt"] = []byte(err.Error() + "\n")
		b.problem("etcd could not be asked: %v", err)
	}
	for name, v := range files {
		b.json(name, v)
	}
}

func (b *bundle) json(file string, v any) {
	if v == nil {
		return
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		b.problem("%s: %v", file, err)
		return
	}
	b.files[file] = append(data, '\n')
}

// eventTime is when an event last happened, by whichever of its times is set.
func eventTime(obj client.Object) metav1.Time {
	e := obj.(*corev1.Event)
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp
	case !e.EventTime.IsZero():
		return metav1.NewTime(e.EventTime.Time)
	}
	return e.CreationTimestamp
}
