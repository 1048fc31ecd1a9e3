#!/usr/bin/env bash
# Builds the real components the tests run against (kube-apiserver and friends, etcd, kubectl)
# from the Go module proxy into a versioned cache outside the repository, and reuses that cache.
# Nothing prebuilt is downloaded; nothing built is committed.
#
#   hack/testbed.sh envtest      build what envtest needs; print the assets directory last
#   hack/testbed.sh etcd V       build etcd, etcdctl, etcdutl at V; print their directory last
#   hack/testbed.sh kube         build the control plane and kubectl; print their directory last
#   hack/testbed.sh cert-manager build a cert-manager controller and copy its CRDs; print the bin directory last
#   hack/testbed.sh minio        build the minio server and the mc client; print their directory last
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-1.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}
CACHE=${ETCD_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator}
KUBE_COMPONENTS=${KUBE_COMPONENTS:-kube-apiserver kubectl kube-controller-manager kube-scheduler}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-1.21.2}
# minio publishes no semver tags on the proxy, so both pins are pseudo-versions.
MINIO_VERSION=${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}
MC_VERSION=${MC_VERSION:-v0.0.0-20250313080218-cf909e1063a9}

log() { printf '[testbed] %s\n' "$*" >&2; }

# missing DIR NAME... : true when any of the binaries is absent.
missing() {
  local dir=$1; shift
  local name
  for name in "$@"; do [ -x "$dir/$name" ] || return 0; done
  return 1
}

build_etcd() {
  local version=$1 out="$CACHE/etcd-v$1"
  if ! missing "$out/bin" etcd etcdctl etcdutl; then echo "$out/bin"; return; fi
  log "building etcd v$version (etcd, etcdctl, etcdutl) into $out/bin; about 2 minutes cold"
  local src="$out/src"
  rm -rf "$src" && mkdir -p "$src/etcd" "$out/bin"
  cat >"$src/go.mod" <<MOD
module etcd-build

go 1.24
MOD
  cat >"$src/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (
    cd "$src"
    go get "go.etcd.io/etcd/server/v3@v$version" "go.etcd.io/etcd/etcdctl/v3@v$version" \
      "go.etcd.io/etcd/etcdutl/v3@v$version" >&2
    CGO_ENABLED=0 go build -trimpath -o "$out/bin.tmp/etcd" ./etcd >&2
    CGO_ENABLED=0 go build -trimpath -o "$out/bin.tmp/etcdctl" go.etcd.io/etcd/etcdctl/v3 >&2
    CGO_ENABLED=0 go build -trimpath -o "$out/bin.tmp/etcdutl" go.etcd.io/etcd/etcdutl/v3 >&2
  )
  mv "$out/bin.tmp/"* "$out/bin/" && rmdir "$out/bin.tmp"
  echo "$out/bin"
}

# kube_wrapper_module DIR: a module that requires k8s.io/kubernetes and pins every staging
# module it replaces with a local path to the release of the same minor.
kube_wrapper_module() {
  local src=$1 gomod staging
  mkdir -p "$src"
  gomod=$(cd "$src" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" |
    sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging=$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod")
  {
    printf 'module kube-build\n\ngo 1.25\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$KUBE_VERSION"
    for m in $staging; do printf '\t%s => %s v0.%s\n' "$m" "$m" "${KUBE_VERSION#1.}"; done
    printf ')\n'
  } >"$src/go.mod"
  printf 'package tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n' >"$src/tools.go"
}

build_kube() {
  local out="$CACHE/kube-v$KUBE_VERSION"
  # shellcheck disable=SC2086
  if ! missing "$out/bin" $KUBE_COMPONENTS; then echo "$out/bin"; return; fi
  local src="$out/src"
  rm -rf "$src"
  kube_wrapper_module "$src"
  mkdir -p "$out/bin"
  (cd "$src" && go mod tidy >&2)
  local c
  for c in $KUBE_COMPONENTS; do
    [ -x "$out/bin/$c" ] && continue
    log "building $c v$KUBE_VERSION; kube-apiserver takes about 9 minutes cold on 2 cores"
    (cd "$src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$out/bin/$c.tmp" "k8s.io/kubernetes/cmd/$c" >&2)
    mv "$out/bin/$c.tmp" "$out/bin/$c"
  done
  echo "$out/bin"
}

# envtest wants kube-apiserver, etcd and kubectl in one directory.
envtest_assets() {
  local etcd_bin kube_bin dir="$CACHE/envtest-k$KUBE_VERSION-e$ETCD_VERSION"
  etcd_bin=$(build_etcd "$ETCD_VERSION")
  kube_bin=$(KUBE_COMPONENTS="kube-apiserver kubectl" build_kube)
  mkdir -p "$dir"
  ln -sfn "$etcd_bin/etcd" "$dir/etcd"
  ln -sfn "$kube_bin/kube-apiserver" "$dir/kube-apiserver"
  ln -sfn "$kube_bin/kubectl" "$dir/kubectl"
  echo "$dir"
}

# cert-manager's cmd/controller is a separate module the proxy does not serve, so the wrapper
# module carries a small main of its own over the library's controller registry. The CRDs come
# from deploy/crds in the same module: plain controller-gen output (the chart's copies are the
# helm-templated ones), so they are copied as they are.
build_cert_manager() {
  local version=$CERT_MANAGER_VERSION out="$CACHE/cert-manager-v$CERT_MANAGER_VERSION"
  if ! missing "$out/bin" cert-manager-controller && [ -s "$out/crds/cert-manager.io_certificates.yaml" ]; then
    echo "$out/bin"; return
  fi
  log "building cert-manager v$version controller into $out/bin; about 5 minutes cold on 2 cores"
  local src="$out/src"
  rm -rf "$src" && mkdir -p "$src/controller" "$out/bin"
  cat >"$src/go.mod" <<MOD
module cert-manager-build

go 1.26

require github.com/cert-manager/cert-manager v$version
MOD
  cert_manager_main >"$src/controller/main.go"
  (
    cd "$src"
    go mod tidy >&2
    CGO_ENABLED=0 go build -trimpath -o "$out/bin/cert-manager-controller.tmp" ./controller >&2
  )
  mv "$out/bin/cert-manager-controller.tmp" "$out/bin/cert-manager-controller"
  local dir
  dir=$(cd "$src" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)
  rm -rf "$out/crds" && mkdir -p "$out/crds"
  cp "$dir"/deploy/crds/*.yaml "$out/crds/"
  chmod u+w "$out"/crds/*.yaml # the module cache is read-only; the copies need not be
  echo "$out/bin"
}

cert_manager_main() {
  cat <<'GO'
// Command cert-manager-controller runs the cert-manager controllers the test bed needs
// (certificates, CA and self-signed issuance, approval, Issuers and ClusterIssuers) against
// the API server named by a kubeconfig. ACME, Vault, Venafi and the ingress/gateway shims
// stay off: they need outside services or APIs the test bed does not have.
package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/google/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// The names the imported packages register under; a name missing after a version bump is fatal
// rather than a silently absent controller.
var enabled = []string{
	"certificates-issuing", "certificates-key-manager", "certificates-request-manager",
	"certificates-readiness", "certificates-trigger", "certificates-revision-manager",
	"certificaterequests-approver", "certificaterequests-issuer-ca",
	"certificaterequests-issuer-selfsigned", "issuers", "clusterissuers",
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file; in-cluster config when empty")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager", "namespace of the secrets ClusterIssuers refer to")
	leaderElect := flag.Bool("leader-elect", true, "run only while holding the lease; -leader-elect=false for a single instance")
	leaseNS := flag.String("leader-election-namespace", "kube-system", "namespace of the leader election lease")
	klog.InitFlags(nil)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log)
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig: *kubeconfig, KubernetesAPIQPS: 20, KubernetesAPIBurst: 50,
		IssuerOptions: controller.IssuerOptions{ClusterResourceNamespace: *clusterNS},
		// Upstream waits 1h to 32h before retrying a failed request; tests cannot wait that long.
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/"},
			CertificateRequestMinimumBackoffDuration: 5 * time.Second,
			CertificateRequestMaximumBackoffDuration: time.Minute,
		},
	})
	if err != nil {
		klog.Fatalf("building controller context: %v", err)
	}

	run := func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, name := range enabled {
			newController, ok := controller.Known()[name]
			if !ok {
				klog.Fatalf("controller %q is not registered in this cert-manager version", name)
			}
			c, err := newController(factory)
			if err != nil {
				klog.Fatalf("creating controller %s: %v", name, err)
			}
			wg.Go(func() {
				// Run fails when stopped before its caches synced; only a failure while running counts.
				if err := c.Run(5, ctx); err != nil && ctx.Err() == nil {
					klog.Fatalf("controller %s: %v", name, err)
				}
			})
		}
		// Constructors only ask the shared factories for informers; the informers start once all
		// controllers have asked, so each runs a single watch per resource type.
		shared, err := factory.Build("informers")
		if err != nil {
			klog.Fatalf("building informer context: %v", err)
		}
		shared.KubeSharedInformerFactory.Start(ctx.Done())
		shared.SharedInformerFactory.Start(ctx.Done())
		klog.Infof("started %d controllers", len(enabled))
		wg.Wait()
	}
	if !*leaderElect {
		run(ctx)
		return
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("loading kubeconfig: %v", err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	host, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, *leaseNS, "cert-manager-controller",
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: host + "_" + uuid.NewString()})
	if err != nil {
		klog.Fatalf("creating lease lock: %v", err)
	}
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: run,
			OnStoppedLeading: func() { klog.Info("leader election lost or released; exiting") },
		},
	})
}
GO
}

# minio and mc go into one directory named after the server's version; mc is pinned separately
# because its newest pseudo-version on the proxy is older than the server's.
build_minio() {
  local out="$CACHE/minio-$MINIO_VERSION"
  if ! missing "$out/bin" minio mc; then echo "$out/bin"; return; fi
  log "building minio $MINIO_VERSION and mc $MC_VERSION into $out/bin; about 8 and 2 minutes cold on 2 cores"
  rm -rf "$out/bin.tmp" && mkdir -p "$out/bin" "$out/bin.tmp"
  # go install pkg@version builds in module mode from the module's own go.mod, so no wrapper
  # module is needed; GOBIN points at a scratch dir so a half-built binary is never reused.
  local m
  for m in "github.com/minio/minio@$MINIO_VERSION" "github.com/minio/mc@$MC_VERSION"; do
    [ -x "$out/bin/$(basename "${m%@*}")" ] && continue
    log "go install $m"
    GOBIN="$out/bin.tmp" CGO_ENABLED=0 go install -trimpath "$m" >&2
    mv "$out/bin.tmp/"* "$out/bin/"
  done
  rmdir "$out/bin.tmp"
  echo "$out/bin"
}

case "${1:-envtest}" in
envtest) envtest_assets ;;
etcd) build_etcd "${2:-$ETCD_VERSION}" ;;
kube) build_kube ;;
cert-manager) build_cert_manager ;;
minio) build_minio ;;
*) echo "usage: $0 envtest | etcd [VERSION] | kube | cert-manager | minio" >&2; exit 2 ;;
esac
