// Command localcluster runs the local cluster: a real Kubernetes control plane and node agents
// that run Pods as local processes (see test/localcluster/DESIGN.md).
//
//	localcluster up [flags]     start in the background (idempotent); print the kubeconfig path last
//	localcluster down [flags]   stop everything and remove every trace, also after a crash
//	localcluster env [flags]    print the export line for KUBECONFIG
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/quorumkeeper/etcd-operator/test/localcluster/runtime"
)

const defaultDir = "/var/lib/etcd-operator-localcluster"

type options struct {
	dir         string
	nodes       int
	kubeBinDir  string
	etcdBin     string
	images      string
	certManager string // directory of the cert-manager controller; "" = not started
	minio       string // MinIO binary; "" = not started
	foreground  bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == runtime.InitCommand {
		runtime.InitMain(os.Args[2:])
		return
	}
	if len(os.Args) < 2 {
		usage()
	}
	var o options
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	fs.StringVar(&o.dir, "dir", envOr("LOCALCLUSTER_DIR", defaultDir), "state directory; removed by down")
	fs.IntVar(&o.nodes, "nodes", 3, "number of node agents (each its own zone)")
	fs.StringVar(&o.kubeBinDir, "kube-bin", "", "directory with kube-apiserver, kube-controller-manager, kube-scheduler (hack/testbed.sh kube)")
	fs.StringVar(&o.etcdBin, "etcd", "", "etcd binary for the apiserver's own storage (hack/testbed.sh etcd)")
	fs.StringVar(&o.images, "images", "", "image map: image reference -> host files (hack/testbed.sh images)")
	fs.StringVar(&o.certManager, "cert-manager", "", "start cert-manager: directory of its controller (hack/testbed.sh cert-manager)")
	fs.StringVar(&o.minio, "minio", "", "start MinIO on the bridge address: its binary (hack/testbed.sh minio)")
	fs.BoolVar(&o.foreground, "foreground", false, "run the supervisor in this process")
	_ = fs.Parse(os.Args[2:])

	var err error
	switch os.Args[1] {
	case "up":
		if o.foreground {
			err = supervise(o)
		} else {
			err = up(o)
		}
	case "down":
		err = down(o.dir)
	case "env":
		fmt.Printf("export KUBECONFIG=%s\n", kubeconfigPath(o.dir))
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localcluster up|down|env [--dir DIR] [--nodes N] [--kube-bin DIR] [--etcd PATH] [--images FILE]")
	os.Exit(2)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
