// Package versioncmd is `kubectl etcd version`: the plugin's build, the operator's as its
// Deployments run it, and the API server's Kubernetes version.
package versioncmd

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/migrate"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/version"
)

// Info is the whole answer of `kubectl etcd version`. What could not be read says why in its
// Error field instead of failing the command: the plugin's own version is always there.
type Info struct {
	Plugin        Build             `json:"plugin"`
	Operators     []OperatorVersion `json:"operators,omitempty"`
	OperatorError string            `json:"operatorError,omitempty"`
	Server        string            `json:"serverVersion,omitempty"`
	ServerError   string            `json:"serverError,omitempty"`
}

// Build is how the plugin binary was built.
type Build struct {
	// Version is internal/version.Version, stamped by the build ("dev" without it).
	Version string `json:"version"`
	// Revision is the commit the build stamped (internal/version.StampedRevision), else the one Go
	// recorded (vcs.revision, with Modified saying the work tree had changes).
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// OperatorVersion is one Deployment of this operator.
type OperatorVersion struct {
	Namespace  string `json:"namespace"`
	Deployment string `json:"deployment"`
	Image      string `json:"image"`
	// Version is the chart's app.kubernetes.io/version label where Helm installed it, else
	// the image's tag.
	Version  string `json:"version"`
	Replicas int32  `json:"replicas"`
	Ready    int32  `json:"readyReplicas"`
	// ImageIDs are the image digests its running Pods run: the exact build, whatever the tag.
	ImageIDs []string `json:"imageIDs,omitempty"`
	selector map[string]string
}

type flags struct {
	clientOnly bool
}

// NewCmd is `kubectl etcd version`.
func NewCmd(o *cli.Options) *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "The plugin's version and revision, the operator's (from its Deployments) and the API server's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Print(printout(Of(cmd.Context(), o, f.clientOnly)))
		},
	}
	cmd.Flags().BoolVar(&f.clientOnly, "client", false, "the plugin's version only; ask no server")
	return cmd
}

// Of is the answer of `kubectl etcd version` (with clientOnly, the plugin's build alone).
func Of(ctx context.Context, o *cli.Options, clientOnly bool) Info {
	info := Info{Plugin: pluginBuild(debug.ReadBuildInfo())}
	if !clientOnly {
		lookUp(ctx, o, &info)
	}
	return info
}

// lookUp fills in the operator's and the server's versions, or why they could not be read.
func lookUp(ctx context.Context, o *cli.Options, info *Info) {
	k, err := o.Kube()
	if err != nil {
		info.OperatorError, info.ServerError = err.Error(), err.Error()
		return
	}
	info.Operators, err = operators(ctx, k)
	if err != nil {
		info.OperatorError = err.Error()
	} else if len(info.Operators) == 0 {
		info.OperatorError = fmt.Sprintf("no Deployment labelled %s=%s (other than Cozystack's operator) in any namespace", etcdv1.LabelName, specs.ManagerName)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(k.Config)
	if err == nil {
		sv, verr := dc.ServerVersion()
		if verr == nil {
			info.Server = sv.GitVersion
		}
		err = verr
	}
	if err != nil {
		info.ServerError = err.Error()
	}
}

// pluginBuild reads the plugin's version and revision as the build stamped them, else the
// revision Go recorded (a plain go build in a clone; not in a git worktree, nor with
// -buildvcs=false).
func pluginBuild(bi *debug.BuildInfo, ok bool) Build {
	b := Build{Version: version.Version, Revision: version.StampedRevision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if b.Revision != "" || !ok {
		return b
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// operators finds this operator's Deployments in every namespace: both its kustomize
// manifests and its Helm chart label them app.kubernetes.io/name=etcd-operator. Cozystack's
// operator has the same label and is told apart by its image.
func operators(ctx context.Context, k *cli.Kube) ([]OperatorVersion, error) {
	list := &appsv1.DeploymentList{}
	if err := k.Client.List(ctx, list, client.MatchingLabels{etcdv1.LabelName: specs.ManagerName}); err != nil {
		return nil, cli.ExplainForbidden(err, "list deployments in all namespaces")
	}
	out := operatorsOf(list.Items)
	for i := range out {
		out[i].ImageIDs = imageIDs(ctx, k, out[i])
	}
	return out, nil
}

// operatorsOf picks this operator's Deployments and reads each one's version.
func operatorsOf(deployments []appsv1.Deployment) []OperatorVersion {
	var out []OperatorVersion
	for _, d := range deployments {
		c := managerContainer(d.Spec.Template.Spec.Containers)
		if c == nil || strings.Contains(c.Image, migrate.CozystackOperatorImage) {
			continue
		}
		v := d.Labels["app.kubernetes.io/version"]
		if v == "" {
			v = imageTag(c.Image)
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		op := OperatorVersion{Namespace: d.Namespace, Deployment: d.Name, Image: c.Image, Version: v, Replicas: replicas, Ready: d.Status.ReadyReplicas}
		if d.Spec.Selector != nil {
			op.selector = d.Spec.Selector.MatchLabels
		}
		out = append(out, op)
	}
	return out
}

// managerContainer is the operator's container: the one named manager, as the manifests and
// the chart name it, else the first.
func managerContainer(cs []corev1.Container) *corev1.Container {
	for i := range cs {
		if cs[i].Name == "manager" {
			return &cs[i]
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return &cs[0]
}

// imageTag is the tag of an image reference ("" for none, or for a digest only); a registry's
// port is no tag.
func imageTag(image string) string {
	image, _, _ = strings.Cut(image, "@")
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return ""
	}
	return image[i+1:]
}

// imageIDs are the digests the Deployment's running Pods run; none when they cannot be read
// (the user may not list Pods in the operator's namespace).
func imageIDs(ctx context.Context, k *cli.Kube, op OperatorVersion) []string {
	if len(op.selector) == 0 {
		return nil
	}
	pods := &corev1.PodList{}
	if err := k.Client.List(ctx, pods, client.InNamespace(op.Namespace), client.MatchingLabels(op.selector)); err != nil {
		return nil
	}
	var ids []string
	for _, p := range pods.Items {
		c := managerContainer(p.Spec.Containers)
		for _, cs := range p.Status.ContainerStatuses {
			if c != nil && cs.Name == c.Name && cs.ImageID != "" && !slices.Contains(ids, cs.ImageID) {
				ids = append(ids, cs.ImageID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// printout is the answer for -o: a table (wide adds the operator's image digests), JSON or
// YAML; it names no object, so -o name is refused.
func printout(info Info) cli.Printout {
	return cli.Printout{Value: info, Table: func(w *tabwriter.Writer, wide bool) {
		p := info.Plugin
		rev := cli.Dash(p.Revision)
		if p.Modified {
			rev += " (modified)"
		}
		cli.Row(w, "plugin:\t%s\trevision %s\t%s %s\n", p.Version, rev, p.GoVersion, p.Platform)
		for _, op := range info.Operators {
			cli.Row(w, "operator:\t%s\t%s/%s\t%s\t%d/%d ready\n", cli.Dash(op.Version), op.Namespace, op.Deployment, op.Image, op.Ready, op.Replicas)
			if wide {
				for _, id := range op.ImageIDs {
					cli.Row(w, "\t\t\t%s\n", id)
				}
			}
		}
		if info.OperatorError != "" {
			cli.Row(w, "operator:\tunknown: %s\n", info.OperatorError)
		}
		switch {
		case info.ServerError != "":
			cli.Row(w, "server:\tunknown: %s\n", info.ServerError)
		case info.Server != "":
			cli.Row(w, "server:\t%s\n", info.Server)
		}
	}}
}
