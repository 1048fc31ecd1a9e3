# Every tool and test binary is built from the Go module proxy into a versioned cache outside
# the repository (hack/tool.sh, hack/testbed.sh); nothing is downloaded prebuilt.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

CONTROLLER_GEN = $(shell hack/tool.sh controller-gen)
GOLANGCI_LINT = $(shell hack/tool.sh golangci-lint)
GO_TEST_FLAGS ?= -count=1

.PHONY: all
all: build

##@ Development

.PHONY: generate
generate: ## Write deepcopy methods for the API types.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
manifests: ## Write CRDs (config/crd/bases) and RBAC (config/rbac) from the code's markers.
	$(CONTROLLER_GEN) crd rbac:roleName=etcd-operator-manager paths=./api/... paths=./internal/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when generated files are stale.
	@git diff --exit-code -- api config || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }

.PHONY: fmt
fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet:
	go vet ./...

.PHONY: lint
lint: vet ## go vet and golangci-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: build
build: ## Build the operator binary into bin/.
	CGO_ENABLED=0 go build -o bin/etcd-operator ./cmd/etcd-operator

.PHONY: plugin
plugin: ## Build the kubectl etcd plugin into bin/kubectl-etcd (put bin/ on PATH to use it).
	CGO_ENABLED=0 go build -o bin/kubectl-etcd ./cmd/kubectl-etcd

##@ Test bed

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver, etcd and kubectl if missing; print their directory last.
	@hack/testbed.sh envtest

##@ Local cluster

.PHONY: demo
demo: ## Local cluster, operator, a sample 3-member EtcdCluster and its status.
	@hack/demo.sh

.PHONY: local-up
local-up: ## Start the local cluster in the background; print the kubeconfig path last.
	@hack/local-up.sh

.PHONY: local-down
local-down: ## Stop the local cluster and remove every trace of it.
	@CGO_ENABLED=0 go build -o bin/localcluster ./cmd/localcluster && bin/localcluster down

##@ Tests

.PHONY: test
test: verify-generated lint test-unit test-api test-localcluster test-e2e robustness ## Everything CI runs.

.PHONY: test-unit
test-unit: ## Unit tests, and the etcd layer against real etcd processes.
	hack/testbed.sh etcd >/dev/null
	go test $(GO_TEST_FLAGS) ./api/... ./internal/... ./test/robustness/...

.PHONY: test-localcluster
test-localcluster: ## The local cluster: its parts (as root), then the whole of it end to end.
	hack/testbed.sh kube >/dev/null
	hack/testbed.sh cert-manager >/dev/null
	hack/testbed.sh minio >/dev/null
	go test $(GO_TEST_FLAGS) ./test/localcluster/ ./test/localcluster/netsetup/ ./test/localcluster/runtime/ \
		./test/localcluster/node/ ./test/localcluster/provisioner/
	go test $(GO_TEST_FLAGS) -timeout 30m -v ./test/localcluster/e2e/ 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: test-api
test-api: ## CRD validation and defaults against a real kube-apiserver.
	KUBEBUILDER_ASSETS="$$(hack/testbed.sh envtest | tail -n1)" go test $(GO_TEST_FLAGS) -v ./test/api/... 2>&1 | \
		grep -vE '^=== (RUN|PAUSE|CONT)' 

.PHONY: test-e2e
test-e2e: ## The operator, deployed from config/, on the local cluster; stops the cluster after.
	hack/e2e.sh

.PHONY: robustness
robustness: ## Faults injected while a recorded workload runs; checks linearizability, watches, lost writes (ROBUSTNESS_TRIALS=30 for the long form).
	hack/robustness.sh

##@ Benchmarks

.PHONY: bench
bench: ## Operator vs. etcd started by hand, as ratios; API writes and memory at rest. Stops the local cluster after.
	hack/bench.sh

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
