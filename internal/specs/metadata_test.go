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

func objs(in ...metav1.Object) []metav1.Object { return in }

// carriedMetadata is the metadata an object hands on to what is made from it: a Job's Pod
// template, a Certificate's secretTemplate (the Secret cert-manager fills).
func carriedMetadata(t *testing.T, obj metav1.Object) map[string]metav1.Object {
	t.Helper()
	out := map[string]metav1.Object{"": obj}
	switch o := obj.(type) {
	case *batchv1.Job:
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
					what := obj.GetName() + " " + where
					if m.GetLabels()["team"] != "storage" || m.GetAnnotations()["owner"] != "team-a" {
						t.Errorf("%s: labels %v, annotations %v: spec.additionalMetadata missing", what, m.GetLabels(), m.GetAnnotations())
					}
					for k, v := range ownCarried[where].GetLabels() {
						if m.GetLabels()[k] != v {
							t.Errorf("%s: the operator's label %s=%s lost to spec.additionalMetadata (%s)", what, k, v, m.GetLabels()[k])
						}
					}
					for k, v := range ownCarried[where].GetAnnotations() {
						// The Pod's fingerprint covers spec.additionalMetadata: it differs, as it should.
						if m.GetAnnotations()[k] != v && k != etcdv1.AnnotationPodTemplateHash {
							t.Errorf("%s: the operator's annotation %s=%s lost to spec.additionalMetadata", what, k, v)
						}
					}
					for k, v := range m.GetLabels() {
						if _, ours := ownCarried[where].GetLabels()[k]; !ours && strings.HasPrefix(k, etcdv1.KeyPrefix) {
							t.Errorf("%s: label %s=%s taken from spec.additionalMetadata", what, k, v)
						}
					}
					for k, v := range m.GetAnnotations() {
						if _, ours := ownCarried[where].GetAnnotations()[k]; !ours && strings.HasPrefix(k, etcdv1.KeyPrefix) {
							t.Errorf("%s: annotation %s=%s taken from spec.additionalMetadata", what, k, v)
						}
					}
				}
			}
			if !reflect.DeepEqual(c, before) {
				t.Error("the builder changed the cluster")
			}
		})
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
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, file)
	}
	// Struct types of this package that hold an object (IssuedCertificate).
	local := map[string]*ast.StructType{}
	for _, file := range parsed {
		for _, decl := range file.Decls {
			if gd, ok := decl.(*ast.GenDecl); ok {
				for _, spec := range gd.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						if st, ok := ts.Type.(*ast.StructType); ok {
							local[ts.Name.Name] = st
						}
					}
				}
			}
		}
	}
	var found []string
	for _, file := range parsed {
		imports := map[string]string{}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
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
				if st == nil || depth > 0 {
					return false
				}
				for _, f := range st.Fields.List {
					if isObject(f.Type, depth+1) {
						return true
					}
				}
			}
			return false
		}
		for _, decl := range file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Type.Results == nil {
				continue
			}
			for _, r := range fd.Type.Results.List {
				if isObject(r.Type, 0) {
					found = append(found, fd.Name.Name)
					break
				}
			}
		}
	}
	slices.Sort(found)
	if len(found) < 10 {
		t.Fatalf("found only the builders %v: the scan is broken", found)
	}
	for _, name := range found {
		if builders[name] == nil {
			t.Errorf("builder %s returns an object and is not in the additionalMetadata table (builders)", name)
		}
	}
}
