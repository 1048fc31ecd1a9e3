// Command etcdsim answers etcd's client API for many clusters from one process (package
// test/etcdsim), for measuring the operator at a scale the machine cannot run etcd at.
// Every member's client URL must reach its listener (DNS or /etc/hosts names it):
//
//	go -C test build -o "$PWD/bin/etcdsim" ./cmd/etcdsim
//	bin/etcdsim -listen :2379 -clusters clusters.yaml
//
// The file lists the clusters to start with, each bootstrapped with all its members:
//
//	# clusters.yaml
//	- token: tok
//	  members:
//	  - {name: db-0, peerURLs: [http://db-0.db.ns.svc:2380], clientURLs: [http://db-0.db.ns.svc:2379]}
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"sigs.k8s.io/yaml"

	"github.com/quorumkeeper/etcd-operator/test/etcdsim"
)

type clusterSpec struct {
	Token   string           `json:"token"`
	Members []etcdsim.Member `json:"members"`
}

func main() {
	listen := flag.String("listen", ":2379", "address to answer every member's client URL on")
	file := flag.String("clusters", "", "YAML list of clusters to bootstrap at start")
	var opts etcdsim.Options
	flag.IntVar(&opts.MaxLearners, "max-learners", 1, "etcd's --max-learners")
	flag.BoolVar(&opts.ManualStart, "manual-start", false, "leave added learners unstarted (nothing here starts them)")
	flag.DurationVar(&opts.StartDelay, "start-delay", 0, "how long an added learner takes to start")
	flag.Parse()
	if err := run(*listen, *file, opts); err != nil {
		fmt.Fprintln(os.Stderr, "etcdsim:", err)
		os.Exit(1)
	}
}

func run(listen, file string, opts etcdsim.Options) error {
	s := etcdsim.New(opts)
	if err := bootstrap(s, file); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	g := s.Server()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	fmt.Printf("etcdsim: %d clusters on %s\n", s.Clusters(), lis.Addr())
	return g.Serve(lis)
}

func bootstrap(s *etcdsim.Sim, file string) error {
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var specs []clusterSpec
	if err := yaml.UnmarshalStrict(data, &specs); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, c := range specs {
		if _, err := s.Bootstrap(c.Token, c.Members); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	}
	return nil
}
