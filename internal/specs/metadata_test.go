package specs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// metadataCluster has spec.additionalMetadata, every feature that makes objects (cert-manager
// TLS, auth, a NetworkPolicy), and a user key under the operator's prefix, which no object
// may take.
func metadataCluster() *etcdv1.EtcdCluster {
	c := cluster(certManagerTLS, func(c *etcdv1.EtcdCluster) {
		c.Spec.Auth = &etcdv1.AuthSpec{Enabled: true}
		c.Spec.NetworkPolicy = &etcdv1.NetworkPolicySpec{}
		c.Spec.AdditionalMetadata = &etcdv1.AdditionalMetadata{
			Labels: map[string]string{"team": "storage", etcdv1.LabelCluster: "hijack", etcdv1.LabelName: "hijack",
				etcdv1.KeyPrefix + "snapshot-of": "db"},
			Annotations: map[string]string{"owner": "team-a", etcdv1.AnnotationReplace: "true"},
		}
	})
	return c
}

// builders are every exported builder of this package that returns an object, by name, each
// called for metadataCluster. TestEveryBuilderIsInTheMetadataTable fails when a builder is
// missing here.
var builders = map[string]func(c *etcdv1.EtcdCluster) []metav1.Object{
	"Pod":             func(c *etcdv1.EtcdCluster) []metav1.Object { return objs(Pod(c, member(c, "db-1"), PodOptions{})) },
	"PVC":             func(c *etcdv1.EtcdCluster) []metav1.Object { return objs(PVC(c, member(c, "db-1"))) },
	"HeadlessService": func(c *etcdv1.EtcdCluster) []metav1.Object { return objs(HeadlessService(c)) },
	"ClientService":   func(c *etcdv1.EtcdCluster) []metav1.Object { return objs(ClientService(c)) },
	"AdoptedClientService": func(c *etcdv1.EtcdCluster) []metav1.Object {
		adopted := c.DeepCopy()
		adopted.Annotations = map[string]string{etcdv1.AnnotationAdoptedSubdomain: "db-headless=db-0," + etcdv1.AdoptedSubdomainEveryMember}
		return objs(AdoptedClientService(adopted))
	},
	"PDB": func(c *etcdv1.EtcdCluster) []metav1.Object {
		return objs(PDB(c, 3, false), PDB(c, 3, true))
	},
	"NetworkPolicy": func(c *etcdv1.EtcdCluster) []metav1.Object {
		return objs(NetworkPolicy(c, OperatorPeer("")))
	},
	"Certificates": func(c *etcdv1.EtcdCluster) []metav1.Object {
		var out []metav1.Object
		for _, ic := range Certificates(c, "") {
			out = append(out, ic.Object)
		}
		return out
	},
	"ServerCertificate": func(c *etcdv1.EtcdCluster) []metav1.Object { return objs(ServerCertificate(c, "")) },
	"PeerCertificate":   func(c *etcdv1.EtcdCluster) []metav1.Object { return objs(PeerCertificate(c, "")) },
	"OperatorClientCertificate": func(c *etcdv1.EtcdCluster) []metav1.Object {
		return objs(OperatorClientCertificate(c))
	},
	"CAProbeCertificate": func(c *etcdv1.EtcdCluster) []metav1.Object {
		return objs(CAProbeCertificate(c, ServerSecretName(c), etcdv1.IssuerReference{Name: "new-ca"}))
	},
	"SnapshotJob": func(c *etcdv1.EtcdCluster) []metav1.Object {
		return objs(SnapshotJob(metadataSnapshot(), c, "op:1", ActionSnapshot), SnapshotJob(metadataSnapshot(), c, "op:1", ActionDelete))
	},
	"VerifyJob": func(c *etcdv1.EtcdCluster) []metav1.Object {
		s := metadataSnapshot()
		return objs(VerifyJob(c, s, etcdv1.MemberRestore{Source: s.Spec.Destination, Checksum: "sha256:abc"}, "op:1"))
	},
	"SnapshotAgentAccess": func(c *etcdv1.EtcdCluster) []metav1.Object {
		sa, role, binding := SnapshotAgentAccess(metadataSnapshot(), c)
		return objs(sa, role, binding)
	},
	"ArchiverDeployment": func(c *etcdv1.EtcdCluster) []metav1.Object {
		return objs(ArchiverDeployment(metadataSchedule(), c, "op:1"))
	},
	"ArchiverAccess": func(c *etcdv1.EtcdCluster) []metav1.Object {
		sa, role, binding := ArchiverAccess(metadataSchedule(), c)
		return objs(sa, role, binding)
	},
	"WithAdditionalMetadata": func(c *etcdv1.EtcdCluster) []metav1.Object {
		m := WithAdditionalMetadata(c, metav1.ObjectMeta{Name: "db-1", Labels: MemberLabels(c.Name, "db-1")})
		return []metav1.Object{&m}
	},
}

func metadataSnapshot() *etcdv1.EtcdSnapshot {
	return &etcdv1.EtcdSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "prod", UID: "u1"},
		Spec: etcdv1.EtcdSnapshotSpec{ClusterRef: corev1.LocalObjectReference{Name: "db"}, Destination: etcdv1.SnapshotLocation{S3: &etcdv1.S3SnapshotLocation{
			Endpoint: "https://s3.example", Bucket: "b", Key: "etcd/", CredentialsSecretRef: corev1.LocalObjectReference{Name: "creds"}}}}}
}

func metadataSchedule() *etcdv1.EtcdSnapshotSchedule {
	s := metadataSnapshot()
	return &etcdv1.EtcdSnapshotSchedule{ObjectMeta: s.ObjectMeta, Spec: etcdv1.EtcdSnapshotScheduleSpec{
		ClusterRef: s.Spec.ClusterRef, Schedule: "0 3 * * *", Destination: s.Spec.Destination, Archive: &etcdv1.SnapshotArchive{}}}
}

func objs(in ...metav1.Object) []metav1.Object { return in }

// carriedMetadata is the metadata an object hands on to what is made from it: a Job's Pod
// template, a Certificate's secretTemplate (the Secret cert-manager fills).
func carriedMetadata(t *testing.T, obj metav1.Object) map[string]metav1.Object {
	t.Helper()
	out := map[string]metav1.Object{"": obj}
	switch o := obj.(type) {
	case *batchv1.Job:
		out["its Pod template"] = &o.Spec.Template.ObjectMeta
	case *appsv1.Deployment:
		out["its Pod template"] = &o.Spec.Template.ObjectMeta
	case *unstructured.Unstructured:
		m := &metav1.ObjectMeta{}
		for field, into := range map[string]*map[string]string{"labels": &m.Labels, "annotations": &m.Annotations} {
			v, _, err := unstructured.NestedStringMap(o.Object, "spec", "secretTemplate", field)
			if err != nil {
				t.Fatal(err)
			}
			*into = v
		}
		out["its secretTemplate"] = m
	}
	return out
}

// Every object a builder makes for a cluster carries spec.additionalMetadata, in its own
// metadata and in what it hands on; the operator's keys win, and a user key under the
// operator's prefix is taken by none.
func TestEveryBuilderCarriesAdditionalMetadata(t *testing.T) {
	t.Parallel()
	for name, build := range builders {
		t.Run(name, func(t *testing.T) {
			c := metadataCluster()
			before := c.DeepCopy()
			built := build(c)
			if len(built) == 0 {
				t.Fatal("built nothing: the cluster lacks what the builder needs")
			}
			bare := metadataCluster()
			bare.Spec.AdditionalMetadata = nil
			own := build(bare) // the same objects, as the operator makes them without it
			for i, obj := range built {
				if reflect.ValueOf(obj).IsNil() {
					continue // SnapshotAgentAccess makes no ServiceAccount for a destination that names one
				}
				ownCarried := carriedMetadata(t, own[i])
				for where, m := range carriedMetadata(t, obj) {
					checkCarried(t, obj.GetName()+" "+where, m, ownCarried[where])
				}
			}
			if !reflect.DeepEqual(c, before) {
				t.Error("the builder changed the cluster")
			}
		})
	}
}

// checkCarried: m has spec.additionalMetadata's keys, every key own (the same object made
// without it) has, with own's value, and no other key under the operator's prefix.
func checkCarried(t *testing.T, what string, m, own metav1.Object) {
	t.Helper()
	if m.GetLabels()["team"] != "storage" || m.GetAnnotations()["owner"] != "team-a" {
		t.Errorf("%s: labels %v, annotations %v: spec.additionalMetadata missing", what, m.GetLabels(), m.GetAnnotations())
	}
	for _, kv := range []struct {
		kind      string
		got, ours map[string]string
	}{{"label", m.GetLabels(), own.GetLabels()}, {"annotation", m.GetAnnotations(), own.GetAnnotations()}} {
		for k, v := range kv.ours {
			// The Pod's fingerprint covers spec.additionalMetadata: it differs, as it should.
			if kv.got[k] != v && k != etcdv1.AnnotationPodTemplateHash {
				t.Errorf("%s: the operator's %s %s=%s lost to spec.additionalMetadata (%s)", what, kv.kind, k, v, kv.got[k])
			}
		}
		for k, v := range kv.got {
			if _, ours := kv.ours[k]; !ours && strings.HasPrefix(k, etcdv1.KeyPrefix) {
				t.Errorf("%s: %s %s=%s taken from spec.additionalMetadata", what, kv.kind, k, v)
			}
		}
	}
}

// A snapshot-of label is the operator's on the Job that takes a snapshot (the cluster's
// NetworkPolicy admits its Pod by it) and no other object's: the one metadataCluster asks for
// must not reach a Job that deletes a file.
func TestAdditionalMetadataSetsNoOperatorLabel(t *testing.T) {
	t.Parallel()
	del := SnapshotJob(metadataSnapshot(), metadataCluster(), "op:1", ActionDelete)
	if v, ok := del.Labels[etcdv1.LabelSnapshotOf]; ok {
		t.Errorf("the delete Job carries %s=%s", etcdv1.LabelSnapshotOf, v)
	}
	c := metadataCluster()
	c.Spec.AdditionalMetadata = nil
	if m := WithAdditionalMetadata(c, metav1.ObjectMeta{Name: "x"}); m.Labels != nil || m.Annotations != nil {
		t.Errorf("no additionalMetadata: %v %v", m.Labels, m.Annotations)
	}
	if m := WithAdditionalMetadata(nil, metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}); !maps.Equal(m.Labels, map[string]string{"a": "b"}) {
		t.Errorf("no cluster: %v", m.Labels)
	}
}

// Every exported function of this package that returns a Kubernetes object (a type the
// client-go or etcdv1 scheme knows, an unstructured object, or a struct of this package that
// holds one) is in builders: a new builder that forgot spec.additionalMetadata fails
// TestEveryBuilderCarriesAdditionalMetadata instead of reaching a user.
func TestEveryBuilderIsInTheMetadataTable(t *testing.T) {
	t.Parallel()
	files := parsePackage(t)
	found := objectBuilders(files, knownObjectTypes(t), localStructs(files))
	if len(found) < 10 {
		t.Fatalf("found only the builders %v: the scan is broken", found)
	}
	for _, name := range found {
		if builders[name] == nil {
			t.Errorf("builder %s returns an object and is not in the additionalMetadata table (builders)", name)
		}
	}
}

// knownObjectTypes are "importpath.Name" of every kind the schemes know, and the unstructured
// object and ObjectMeta.
func knownObjectTypes(t *testing.T) map[string]bool {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured.Unstructured": true,
		"k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta": true}
	for _, typ := range scheme.AllKnownTypes() {
		known[typ.PkgPath()+"."+typ.Name()] = true
	}
	return known
}

// parsePackage parses this package's non-test files.
func parsePackage(t *testing.T) []*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	return files
}

// localStructs are the package's struct types by name.
func localStructs(files []*ast.File) map[string]*ast.StructType {
	local := map[string]*ast.StructType{}
	for _, file := range files {
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					local[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	return local
}

// objectBuilders are the exported functions whose results include an object, sorted.
func objectBuilders(files []*ast.File, known map[string]bool, local map[string]*ast.StructType) []string {
	var found []string
	for _, file := range files {
		imports := map[string]string{}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		isObject := objectTypeTest(imports, known, local)
		for _, decl := range file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Type.Results == nil {
				continue
			}
			if slices.ContainsFunc(fd.Type.Results.List, func(r *ast.Field) bool { return isObject(r.Type, 0) }) {
				found = append(found, fd.Name.Name)
			}
		}
	}
	slices.Sort(found)
	return found
}

// objectTypeTest says whether a type expression of a file with these imports is an object,
// a pointer to or slice of one, or a local struct with a field that is.
func objectTypeTest(imports map[string]string, known map[string]bool, local map[string]*ast.StructType) func(ast.Expr, int) bool {
	var isObject func(e ast.Expr, depth int) bool
	isObject = func(e ast.Expr, depth int) bool {
		switch x := e.(type) {
		case *ast.StarExpr:
			return isObject(x.X, depth)
		case *ast.ArrayType:
			return isObject(x.Elt, depth)
		case *ast.SelectorExpr:
			pkg, ok := x.X.(*ast.Ident)
			return ok && known[imports[pkg.Name]+"."+x.Sel.Name]
		case *ast.Ident:
			st := local[x.Name]
			return st != nil && depth == 0 && slices.ContainsFunc(st.Fields.List, func(f *ast.Field) bool { return isObject(f.Type, depth+1) })
		}
		return false
	}
	return isObject
}
