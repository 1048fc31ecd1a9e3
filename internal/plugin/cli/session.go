package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/snapshot"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/etcd"
	"github.com/quorumkeeper/etcd-operator/internal/etcdaccess"
	"github.com/quorumkeeper/etcd-operator/internal/specs"
)

// Session is one cluster reached through port-forwards to its running member Pods.
type Session struct {
	Kube    *Kube
	Cluster *etcdv1.EtcdCluster
	Members []etcdv1.EtcdMember
	Pods    map[string]corev1.Pod
	// Endpoints maps a member name to its local forwarded client URL; members without a
	// running Pod are absent.
	Endpoints map[string]string
	// Unreachable are the members with a running Pod that could not be forwarded to.
	Unreachable map[string]error
	Etcd        etcd.Client
	config      etcd.Config
	stops       []func()
}

// Connect reads the cluster, forwards a local port to every running member Pod and opens an
// etcd client with the cluster's TLS and auth, from Secrets read with the user's own rights.
func (o *Options) Connect(ctx context.Context, cluster string) (*Session, error) {
	s, err := o.Load(ctx, cluster)
	if err != nil {
		return nil, err
	}
	if err := s.Dial(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Dial forwards a local port to every running member Pod of the session and opens an etcd
// client with the cluster's TLS and auth; on error the session is closed.
func (s *Session) Dial(ctx context.Context) error {
	cluster := s.Cluster.Name
	scheme := "http"
	if specs.ClientTLS(s.Cluster) {
		scheme = "https"
	}
	// One forward per running member Pod, all at once: each is a round trip to the API server.
	type forwarded struct {
		port uint16
		stop func()
		err  error
	}
	results := make([]*forwarded, len(s.Members))
	var wg sync.WaitGroup
	for i, m := range s.Members {
		if pod, ok := s.Pods[m.Name]; !ok || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		results[i] = &forwarded{}
		wg.Go(func() {
			results[i].port, results[i].stop, results[i].err = forward(s.Kube.Config, s.Kube.Namespace, m.Name)
		})
	}
	wg.Wait()
	var endpoints []string
	for i, r := range results {
		name := s.Members[i].Name
		switch {
		case r == nil:
		case r.err != nil:
			// One member's Pod going away must not hide the others: status shows the error.
			s.Unreachable[name] = r.err
		default:
			s.stops = append(s.stops, r.stop)
			s.Endpoints[name] = fmt.Sprintf("%s://127.0.0.1:%d", scheme, r.port)
			endpoints = append(endpoints, s.Endpoints[name])
		}
	}
	if len(endpoints) == 0 {
		s.Close()
		return fmt.Errorf("cluster %s has no running member Pod to talk to (%v)", cluster, s.Unreachable)
	}
	// The operator's own way of building a client: the CA from the server Secret, its client
	// certificate where etcd requires one, root's password where auth is on.
	factory := &etcdaccess.SecretClientFactory{Reader: s.Kube.Client, Open: func(cfg etcd.Config) (etcd.Client, error) {
		if cfg.TLS != nil {
			// Through the forward the address is 127.0.0.1; the certificate names the Service.
			cfg.TLS.ServerName = specs.ClientServiceHost(s.Cluster)
		}
		cfg.HealthTimeout = 5 * time.Second
		s.config = cfg
		return etcd.New(cfg)
	}}
	cli, err := factory.New(ctx, s.Cluster, endpoints)
	if err != nil {
		s.Close()
		return explainSecretError(err)
	}
	s.Etcd = cli
	return nil
}

// Load reads the cluster, its members and Pods without reaching etcd.
func (o *Options) Load(ctx context.Context, cluster string) (*Session, error) {
	k, err := o.Kube()
	if err != nil {
		return nil, err
	}
	c, members, pods, err := k.Observe(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return &Session{Kube: k, Cluster: c, Members: members, Pods: pods, Endpoints: map[string]string{}, Unreachable: map[string]error{}}, nil
}

// ClientV3For is a raw etcd client of one endpoint, for what the operator's client does not
// offer (compaction, snapshots), with the session's TLS and credentials.
func (s *Session) ClientV3For(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(s.ClientV3Config(endpoint))
}

// ClientV3Config is the configuration ClientV3For uses.
func (s *Session) ClientV3Config(endpoint string) clientv3.Config {
	return clientv3.Config{
		Endpoints: []string{endpoint}, TLS: s.config.TLS,
		Username: s.config.Username, Password: s.config.Password,
		DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
	}
}

// Close stops the client and every port-forward.
func (s *Session) Close() {
	if s.Etcd != nil {
		_ = s.Etcd.Close()
	}
	for _, stop := range s.stops {
		stop()
	}
}

// MemberStatus is what each member says about itself, asked of all members at once.
type MemberStatus struct {
	Status etcd.Status
	Err    error
}

// Statuses asks every forwarded member for its status in parallel.
func (s *Session) Statuses(ctx context.Context) map[string]MemberStatus {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := make(map[string]MemberStatus, len(s.Endpoints))
	for name, ep := range s.Endpoints {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st, err := s.Etcd.Status(cctx, ep)
			mu.Lock()
			out[name] = MemberStatus{st, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	for name, err := range s.Unreachable {
		out[name] = MemberStatus{Err: err}
	}
	return out
}

// MemberByName is the EtcdMember with that name, or an error listing the names there are.
func (s *Session) MemberByName(name string) (*etcdv1.EtcdMember, error) {
	var names []string
	for i := range s.Members {
		if s.Members[i].Name == name {
			return &s.Members[i], nil
		}
		names = append(names, s.Members[i].Name)
	}
	return nil, fmt.Errorf("cluster %s has no member %q; its members are %v", s.Cluster.Name, name, names)
}

// AnyEndpoint is the forwarded endpoint of the first member with one.
func (s *Session) AnyEndpoint() string {
	for _, m := range s.Members {
		if ep, ok := s.Endpoints[m.Name]; ok {
			return ep
		}
	}
	return ""
}

// LeaderEndpoint is the leader's forwarded endpoint (the most recent data), else any.
func (s *Session) LeaderEndpoint(ctx context.Context) string {
	for name, a := range s.Statuses(ctx) {
		if a.Err == nil && a.Status.Leader == a.Status.MemberID {
			return s.Endpoints[name]
		}
	}
	return s.AnyEndpoint()
}

// SaveSnapshot streams a snapshot from the leader into file and says on out how large it is.
func (s *Session) SaveSnapshot(ctx context.Context, out io.Writer, file string) error {
	version, err := snapshot.SaveWithVersion(ctx, zap.NewNop(), s.ClientV3Config(s.LeaderEndpoint(ctx)), file)
	if err != nil {
		return fmt.Errorf("snapshot to %s: %w", file, err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	Say(out, "saved %s: %d bytes, etcd storage version %s\n", file, fi.Size(), version)
	return nil
}
