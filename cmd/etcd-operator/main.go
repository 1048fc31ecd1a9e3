// Command etcd-operator runs the operator's manager: the controllers of the
// etcd-operator.cozystack.io API, with leader election so that two replicas are safe.
// The same binary is the agent the operator runs in Pods from its own image:
// `etcd-operator snapshot-agent`, `etcd-operator restore-agent`, `etcd-operator verify-agent` and
// `etcd-operator copy-self`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/agent"
	"github.com/quorumkeeper/etcd-operator/internal/agent/request"
	"github.com/quorumkeeper/etcd-operator/internal/controller/alarms"
	"github.com/quorumkeeper/etcd-operator/internal/controller/cluster"
	"github.com/quorumkeeper/etcd-operator/internal/controller/defrag"
	"github.com/quorumkeeper/etcd-operator/internal/controller/kit"
	"github.com/quorumkeeper/etcd-operator/internal/controller/member"
	"github.com/quorumkeeper/etcd-operator/internal/controller/schedule"
	"github.com/quorumkeeper/etcd-operator/internal/controller/snapshot"
	"github.com/quorumkeeper/etcd-operator/internal/etcdaccess"
	"github.com/quorumkeeper/etcd-operator/internal/metrics"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
	"github.com/quorumkeeper/etcd-operator/internal/version"
)

type options struct {
	metricsAddr        string
	metricsSecure      bool
	metricsCertPath    string
	watchNamespaces    string
	clusterSelector    string
	probeAddr          string
	leaderElect        bool
	leaderElectNS      string
	leaderElectID      string
	lease              leaseTimes
	imageRepository    string
	agentImage         string
	clusterDomain      string
	maxConcurrent      int
	maxConcurrentRolls int
	zap                zap.Options
	showVersionAndExit bool
}

// agents are the subcommands that run inside Pods; without one, the binary is the manager.
var agents = map[string]func([]string) int{
	request.CommandSnapshot: agent.RunSnapshotAgent,
	request.CommandRestore:  agent.RunRestoreAgent,
	request.CommandVerify:   agent.RunVerifyAgent,
	request.CommandCopySelf: agent.RunCopySelf,
	request.CommandArchive:  agent.RunArchiver,
}

func main() {
	if len(os.Args) > 1 {
		if agentMain, ok := agents[os.Args[1]]; ok {
			os.Exit(agentMain(os.Args[2:]))
		}
	}
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint; 0 turns it off")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers whose token may get /metrics (ClusterRole etcd-operator-metrics-reader); false serves plain HTTP to anyone")
	flag.StringVar(&o.metricsCertPath, "metrics-cert-path", "", "directory holding the metrics endpoint's serving certificate and key (tls.crt, tls.key), reloaded when they change; empty: a self-signed certificate made at start, which no scraper can verify")
	flag.StringVar(&o.watchNamespaces, "watch-namespaces", "", "comma-separated namespaces whose EtcdClusters the operator manages; empty means all")
	flag.StringVar(&o.clusterSelector, "cluster-selector", "", "label selector of the EtcdClusters the operator manages (for example shard=a, or 'tier in (gold,silver)'); empty means all. Another operator whose selector matches takes over a cluster whose labels this one no longer matches")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "elect one active replica through a Lease")
	flag.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "namespace of the Lease; the operator's own namespace when empty")
	flag.StringVar(&o.leaderElectID, "leader-election-id", defaultLeaderElectionID, "name of the leader election Lease; with its namespace, the operator's identity in the claims on its clusters (another operator sharing the namespace needs another)")
	flag.DurationVar(&o.lease.duration, "leader-elect-lease-duration", 15*time.Second, "how long a standby (or a restarted operator) waits for a leader that stopped renewing before it takes over")
	flag.DurationVar(&o.lease.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leading (and exits); shorter than the lease duration")
	flag.DurationVar(&o.lease.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to take the Lease and the leader renews it")
	flag.StringVar(&o.imageRepository, "etcd-image-repository", specs.DefaultImageRepository, "repository of etcd images; the tag is v<spec.version>")
	flag.StringVar(&o.agentImage, "agent-image", "", "image of the snapshot and restore agents (this operator's own); read from the operator's Pod (POD_NAMESPACE, POD_NAME) when empty")
	flag.StringVar(&o.clusterDomain, "cluster-domain", specs.DefaultClusterDomain, "the Kubernetes cluster's DNS domain, for the fully qualified names in the certificates the operator asks cert-manager for")
	flag.IntVar(&o.maxConcurrent, "max-concurrent-reconciles", 4, "how many clusters, members, EtcdDefrags and NOSPACE remediations each controller works on at once; one slow cluster then holds one worker, not all")
	flag.IntVar(&o.maxConcurrentRolls, "max-concurrent-rolls", 10, "how many clusters restart members for a changed Pod spec at once (an operator release that changes how Pods are built outdates every cluster together); 0: no cap")
	flag.BoolVar(&o.showVersionAndExit, "version", false, "print the version and exit")
	o.zap.BindFlags(flag.CommandLine)
	flag.Parse()
	if o.showVersionAndExit {
		fmt.Println(version.Version)
		return
	}
	if errs := validation.IsDNS1123Subdomain(o.clusterDomain); len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "--cluster-domain %q is no DNS domain (%s); for example cluster.local\n", o.clusterDomain, strings.Join(errs, "; "))
		os.Exit(2)
	}
	if errs := validation.IsDNS1123Subdomain(o.leaderElectID); len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "--leader-election-id %q cannot name a Lease (%s)\n", o.leaderElectID, strings.Join(errs, "; "))
		os.Exit(2)
	}
	if err := o.lease.validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := checkMetricsCert(o.metricsCertPath); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if _, err := o.selector(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if err := run(o); err != nil {
		ctrl.Log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := etcdv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

func run(o options) error {
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(o),
		Cache:                   cacheOptions(o),
		Client:                  clientOptions(),
		Controller:              controllerOptions(),
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderElectID,
		LeaderElectionNamespace: o.leaderElectNS,
		LeaseDuration:           &o.lease.duration,
		RenewDeadline:           &o.lease.renewDeadline,
		RetryPeriod:             &o.lease.retryPeriod,
		// Step down at once on SIGTERM so that a rolling update hands over quickly.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if o.agentImage == "" {
		if o.agentImage, err = ownImage(mgr.GetAPIReader()); err != nil {
			return err
		}
	}
	selector, err := o.selector()
	if err != nil {
		return err
	}
	claims := &kit.Claims{Me: kit.Identity(o.leaseNamespace(), o.leaderElectID), Unelected: !o.leaderElect, Selector: selector, Reader: mgr.GetAPIReader()}
	if err := setUpControllers(mgr, o, claims); err != nil {
		return err
	}
	if err := mgr.Add(publishScope(mgr, o, selector)); err != nil {
		return err
	}
	// The cluster gauges come from the leader only: a standby's cache holds the same clusters.
	collector := &metrics.ClusterCollector{Reader: mgr.GetClient(), Log: ctrl.Log.WithName("metrics"), Elected: mgr.Elected(), Selector: selector}
	if err := crmetrics.Registry.Register(collector); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "version", version.Version, "revision", version.Revision(), "operator", claims.Me, "clusterSelector", o.clusterSelector)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// metricsOptions: HTTPS with the certificate in --metrics-cert-path (else a self-signed one),
// and every request's bearer token checked with the API server (TokenReview, then
// SubjectAccessReview for GET /metrics).
func metricsOptions(o options) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure, CertDir: o.metricsCertPath}
	if o.metricsSecure {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}

// checkMetricsCert refuses a --metrics-cert-path without tls.crt and tls.key: controller-runtime
// would serve a self-signed certificate instead, and every scraper that verifies would fail
// with nothing in the operator's log to say why.
func checkMetricsCert(dir string) error {
	if dir == "" {
		return nil
	}
	for _, name := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("--metrics-cert-path %s: %w", dir, err)
		}
	}
	return nil
}

// cacheOptions limits the informers to the watched namespaces, when given (the operator then
// needs RBAC in those namespaces only, docs/install.md), and the Pods, PVCs, Services and
// PDBs cached to those the operator made (all carry its managed-by label): unrelated objects
// of the same kinds do not grow its memory.
func cacheOptions(o options) cache.Options {
	owned := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{etcdv1.LabelManagedBy: specs.ManagerName})}
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{}, DefaultTransform: stripForCache}
	for _, kind := range kit.LabelScoped() {
		opts.ByObject[kind] = owned
	}
	for _, ns := range o.watched() {
		if opts.DefaultNamespaces == nil {
			opts.DefaultNamespaces = map[string]cache.Config{}
		}
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	return opts
}

// watched are the namespaces of --watch-namespaces; none for all.
func (o options) watched() []string {
	var out []string
	for _, ns := range strings.Split(o.watchNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// selector is --cluster-selector parsed, nil when empty (all clusters); the error names the
// flag.
func (o options) selector() (labels.Selector, error) {
	if strings.TrimSpace(o.clusterSelector) == "" {
		return nil, nil
	}
	sel, err := labels.Parse(o.clusterSelector)
	if err != nil {
		return nil, fmt.Errorf("--cluster-selector %q is no label selector: %w", o.clusterSelector, err)
	}
	return sel, nil
}

// defaultLeaderElectionID is the Lease of an operator installed once (and of every operator
// before claims): its clusters' claims name it.
const defaultLeaderElectionID = "etcd-operator.cozystack.io"

// leaseNamespace is where the leader election Lease is, as controller-runtime finds it:
// --leader-election-namespace, else the operator's own namespace.
func (o options) leaseNamespace() string {
	if o.leaderElectNS != "" {
		return o.leaderElectNS
	}
	return kit.OperatorNamespace()
}

// publishScope runs once the operator leads: it writes the namespaces it watches and its
// cluster selector on its Lease, for other operators to take over its claims where it
// stopped watching or selecting. A failure is logged, not fatal: the claims hold meanwhile,
// and only that take-over waits (for a person's hand-over, docs/scaling.md). Without leader
// election there is no Lease to write.
func publishScope(mgr ctrl.Manager, o options, selector labels.Selector) manager.RunnableFunc {
	return func(ctx context.Context) error {
		if !o.leaderElect {
			return nil
		}
		lease := types.NamespacedName{Namespace: o.leaseNamespace(), Name: o.leaderElectID}
		if err := kit.PublishScope(ctx, mgr.GetAPIReader(), mgr.GetClient(), lease, o.watched(), selector); err != nil {
			ctrl.Log.Error(err, "publishing the watched namespaces and the cluster selector on the leader election Lease", "lease", lease)
		}
		return nil
	}
}

// stripForCache drops what no reader of the cache looks at before an object is stored:
// managedFields of every object, and every annotation and label of the objects cached as
// metadata only. Those are the Secrets the cluster controller watches, whose names and
// resourceVersions alone are read; kubectl's last-applied-configuration annotation of a Secret
// made with client-side apply holds the whole Secret, data included, which must not sit in the
// operator's memory. Full objects keep their annotations: the operator writes some of them
// back with an update, which would drop an annotation missing from its copy.
func stripForCache(in any) (any, error) {
	if obj, err := meta.Accessor(in); err == nil && obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil) // nil-checked: kubernetes/kubernetes#124337
	}
	if m, ok := in.(*metav1.PartialObjectMetadata); ok {
		m.Annotations, m.Labels = nil, nil
	}
	return in, nil
}

// clientOptions: Secrets are read from the API server, never from the cache. Their names are
// the users' (root credentials, their own certificates) or cert-manager's, so no label scopes
// them, and a cache would hold every Secret of the watched namespaces with its data. The
// cluster controller watches Secrets' metadata only, to look at a cluster again when one of
// its Secrets changes.
func clientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
}

// controllerOptions turns controller-runtime's priority queue off: it hands out an item of a
// lower priority only while no item of a higher one is ready, with no ageing. Objects listed
// at start are queued at a low priority and events at a high one, so under a steady stream of
// events a cluster that no event concerned waited for ever: with 200 clusters, 8 of them
// polled every second (their Pods unschedulable), one cluster created as the operator
// started was still unreconciled 8 minutes later, alone in the low band. The plain queue is
// first in, first out, and every object's turn comes.
func controllerOptions() config.Controller {
	usePriorityQueue := false
	return config.Controller{UsePriorityQueue: &usePriorityQueue}
}

func setUpControllers(mgr ctrl.Manager, o options, claims *kit.Claims) error {
	cli, recorder := mgr.GetClient(), mgr.GetEventRecorder("etcd-operator")
	// One factory for all: the member, defrag and alarm controllers talk to etcd too, with
	// the same certificates and credentials.
	newClient := etcdaccess.NewSecretClientFactory(cli)
	podOptions := specs.PodOptions{ImageRepository: o.imageRepository, AgentImage: o.agentImage}
	for _, c := range []struct {
		name       string
		reconciler interface{ SetupWithManager(ctrl.Manager) error }
	}{
		{"EtcdCluster", &cluster.Reconciler{
			Client: cli, APIReader: mgr.GetAPIReader(), Recorder: recorder, NewClient: newClient, PodOptions: podOptions,
			ClusterDomain: o.clusterDomain,
			// One etcd client per cluster, kept between reconciles and rebuilt when its
			// Secrets or endpoints change; the member controller's rare removals open their
			// own. It reads the Secrets' resourceVersions from the manager's cache (the
			// metadata informer of the cluster controller's Secret watch): the client
			// reads Secrets live, which would cost API requests on every reconcile.
			Clients:                 kit.NewClientCache(mgr.GetCache(), newClient),
			MaxConcurrentReconciles: o.maxConcurrent,
			OperatorNamespace:       kit.OperatorNamespace(),
			RollSlots:               kit.NewRollSlots(o.maxConcurrentRolls),
			Claims:                  claims,
		}},
		{"EtcdMember", &member.Reconciler{
			Client: cli, APIReader: mgr.GetAPIReader(), Recorder: recorder, NewClient: newClient, PodOptions: podOptions,
			MaxConcurrentReconciles: o.maxConcurrent, Claims: claims,
		}},
		{"EtcdSnapshot", &snapshot.Reconciler{Client: cli, APIReader: mgr.GetAPIReader(), Recorder: recorder, AgentImage: o.agentImage, Claims: claims}},
		{"EtcdSnapshotSchedule", &schedule.Reconciler{Client: cli, APIReader: mgr.GetAPIReader(), Recorder: recorder, Claims: claims, AgentImage: o.agentImage}},
		{"EtcdDefrag", &defrag.Reconciler{Client: cli, APIReader: mgr.GetAPIReader(), Recorder: recorder, NewClient: newClient,
			MaxConcurrentReconciles: o.maxConcurrent, Claims: claims}},
		{"defragmentation schedule", &defrag.ScheduleReconciler{Client: cli, Recorder: recorder, Claims: claims}},
		{"EtcdDefragPolicy", &defrag.PolicyReconciler{Client: cli, Recorder: recorder, Claims: claims}},
		{"NOSPACE remediation", &alarms.Reconciler{Client: cli, Recorder: recorder, NewClient: newClient, MaxConcurrentReconciles: o.maxConcurrent, Claims: claims}},
	} {
		if err := c.reconciler.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("%s controller: %w", c.name, err)
		}
	}
	return nil
}

// ownImage is the image of the container running this operator, read from its Pod with the
// manager's API reader (usable before the manager starts; the Pod is not in the cache until
// then): the agents run from the same image, so the operator and its agents never differ in
// version.
func ownImage(reader client.Reader) (string, error) {
	namespace, name := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if namespace == "" || name == "" {
		return "", errors.New("--agent-image is empty and POD_NAMESPACE/POD_NAME are not set: the operator cannot tell its own image for the snapshot and restore agents")
	}
	pod := &corev1.Pod{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return "", fmt.Errorf("reading the operator's own Pod %s/%s for its image: %w", namespace, name, err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == managerContainer {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("the operator's Pod %s/%s has no container %q", namespace, name, managerContainer)
}

// managerContainer is the operator's container in its Deployment.
const managerContainer = "manager"

// leaseTimes are the leader election's timings. Shorter ones hand over faster after a crash
// (a restarted operator waits one lease duration for the Lease its predecessor held); a renew
// deadline the API server cannot meet under load makes the leader step down and exit.
type leaseTimes struct {
	duration, renewDeadline, retryPeriod time.Duration
}

// validate refuses timings client-go's leader election would reject later, or that would
// let two leaders overlap, naming the flag to change.
func (l leaseTimes) validate() error {
	switch {
	case l.retryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period %s must be positive, for example 2s", l.retryPeriod)
	case l.renewDeadline <= l.retryPeriod*6/5:
		// client-go retries with up to 20% jitter: at least one retry must fit in the deadline.
		return fmt.Errorf("--leader-elect-renew-deadline %s must be longer than 1.2 x --leader-elect-retry-period %s: the leader renews at that period, with jitter, within the deadline", l.renewDeadline, l.retryPeriod)
	case l.duration <= l.renewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration %s must be longer than --leader-elect-renew-deadline %s: a leader that cannot renew must step down before a standby may take over", l.duration, l.renewDeadline)
	}
	return nil
}
