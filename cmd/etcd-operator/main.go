// Command etcd-operator runs the operator's manager: the controllers of the
// etcd-operator.cozystack.io API, with leader election so that two replicas are safe.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/controller"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

type options struct {
	metricsAddr        string
	probeAddr          string
	leaderElect        bool
	leaderElectNS      string
	imageRepository    string
	maxConcurrent      int
	zap                zap.Options
	showVersionAndExit bool
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 turns it off")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&o.leaderElect, "leader-elect", true, "elect one active replica through a Lease")
	flag.StringVar(&o.leaderElectNS, "leader-election-namespace", "", "namespace of the Lease; the operator's own namespace when empty")
	flag.StringVar(&o.imageRepository, "etcd-image-repository", specs.DefaultImageRepository, "repository of etcd images; the tag is v<spec.version>")
	flag.IntVar(&o.maxConcurrent, "max-concurrent-reconciles", 4, "how many clusters, and how many members, each controller reconciles at once; one slow cluster then holds one worker, not all")
	flag.BoolVar(&o.showVersionAndExit, "version", false, "print the version and exit")
	o.zap.BindFlags(flag.CommandLine)
	flag.Parse()
	if o.showVersionAndExit {
		fmt.Println(version)
		return
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
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "etcd-operator.cozystack.io",
		LeaderElectionNamespace: o.leaderElectNS,
		// Step down at once on SIGTERM so that a rolling update hands over quickly.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := setUpControllers(mgr, o); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting", "version", version)
	return mgr.Start(ctrl.SetupSignalHandler())
}

func setUpControllers(mgr ctrl.Manager, o options) error {
	// One factory for both reconcilers: the member controller removes members through etcd
	// too, with the same certificates and credentials.
	newClient := controller.NewSecretClientFactory(mgr.GetClient())
	podOptions := specs.PodOptions{ImageRepository: o.imageRepository}
	clusters := &controller.ClusterReconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Recorder:   mgr.GetEventRecorder("etcd-operator"),
		NewClient:  newClient,
		PodOptions: podOptions,
		// One etcd client per cluster, kept between reconciles and rebuilt when its Secrets
		// or endpoints change; the member controller's rare removals open their own.
		Clients:                 controller.NewClientCache(mgr.GetClient(), newClient),
		MaxConcurrentReconciles: o.maxConcurrent,
		OperatorNamespace:       controller.OperatorNamespace(),
	}
	if err := clusters.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("EtcdCluster controller: %w", err)
	}
	members := &controller.MemberReconciler{
		Client:                  mgr.GetClient(),
		Recorder:                mgr.GetEventRecorder("etcd-operator"),
		NewClient:               newClient,
		PodOptions:              podOptions,
		MaxConcurrentReconciles: o.maxConcurrent,
	}
	if err := members.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("EtcdMember controller: %w", err)
	}
	return nil
}
