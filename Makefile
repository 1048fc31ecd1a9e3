# Every tool and test binary is built from the Go module proxy into a versioned cache outside
# the repository (hack/tool.sh, hack/testbed.sh); nothing is downloaded prebuilt.
# Two Go modules: the product (go.mod: api, cmd, internal) and its test tooling (test/go.mod:
# the local cluster, e2e, robustness, bench, the image builder), built with `go -C test`.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

CONTROLLER_GEN = $(shell hack/tool.sh controller-gen)
GOLANGCI_LINT = $(shell hack/tool.sh golangci-lint)
GO_TEST_FLAGS ?= -count=1
# The machine's one local cluster is taken under this lock (hack/operator-up.sh, test-localcluster).
# To hold the cluster through a whole run, take the lock outside and name another one here:
#   flock /tmp/etcd-operator-localcluster.lock make test LOCALCLUSTER_LOCK=/tmp/etcd-operator-localcluster.held
LOCALCLUSTER_LOCK ?= /tmp/etcd-operator-localcluster.lock
export LOCALCLUSTER_LOCK

# A release is VERSION=vMAJOR.MINOR.PATCH[-PRERELEASE] (make release refuses anything else).
# Without it, a development version of the same form names the commit: v0.0.0-dev-<sha>[-dirty].
VERSION ?= v0.0.0-dev$(shell git describe --always --dirty --exclude='*' 2>/dev/null | sed 's/^/-/')
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
DIST ?= dist
CHART = charts/etcd-operator
# The image's repository; its tag is VERSION.
IMAGE ?= ghcr.io/quorumkeeper/etcd-operator
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# Where the krew manifest downloads the plugin's archives from (+ /VERSION/ARCHIVE); empty:
# the GitHub release of VERSION.
PLUGIN_URL ?=
# Where make push puts the chart (as helm push oci://CHART_REPO); empty: a charts repository
# beside IMAGE's (ghcr.io/org/etcd-operator -> ghcr.io/org/charts).
CHART_REPO ?=
# The one set of binary flags for make build and make image: static, version stamped (make
# release builds with the same flags: test/release/build.go).
GO_BUILD = CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/quorumkeeper/etcd-operator/internal/version.Version=$(VERSION)"
# Go commands of the test module; -o paths given to it are absolute, as it runs in test/.
GO_TEST_MODULE = go -C test
# The etcd releases the etcd layer's tests (internal/etcd) run against, passed to them as
# ETCD_TEST_DIRS: the oldest and newest patch of every supported minor. The newest runs every
# test, the others the membership, status, health, maintenance, downgrade and auth tests
# (docs/install.md, "Versions tested").
ETCD_TEST_VERSIONS ?= 3.5.0 3.5.35 3.6.0 3.6.16 3.7.3

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

.PHONY: chart-sync
chart-sync: ## Copy the generated CRDs and RBAC rules into the Helm chart (no hand copy); write its values schema and README.
	rm -f $(CHART)/crds/*.yaml
	cp config/crd/bases/*.yaml $(CHART)/crds/
	cp config/rbac/role.yaml config/rbac/leader_election_role.yaml config/rbac/metrics_reader_role.yaml $(CHART)/files/rbac/
	mkdir -p $(CHART)/files/monitoring && cp deploy/monitoring/* $(CHART)/files/monitoring/
	@# values.schema.json and README.md, from values.yaml and test/cmd/chartdoc/values.go.
	$(GO_TEST_MODULE) run ./cmd/chartdoc -chart $(CURDIR)/$(CHART)

.PHONY: verify-generated
verify-generated: generate manifests chart-sync ## Fail when generated files (and the chart's copies) are stale.
	@git diff --exit-code -- api config $(CHART) && test -z "$$(git status --porcelain -- $(CHART))" || \
		{ echo "generated files are stale: run 'make generate manifests chart-sync' and commit"; exit 1; }

.PHONY: fmt
fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: tidy
tidy: ## go mod tidy in both modules.
	go mod tidy
	$(GO_TEST_MODULE) mod tidy

.PHONY: vet
vet:
	go vet ./...
	$(GO_TEST_MODULE) vet ./...

.PHONY: lint
lint: vet ## go vet and golangci-lint, in both modules.
	$(GOLANGCI_LINT) run --allow-serial-runners ./...
	cd test && $(GOLANGCI_LINT) run --allow-serial-runners --config ../.golangci.yml ./...

.PHONY: build
build: ## Build the operator binary into bin/.
	$(GO_BUILD) -o bin/etcd-operator ./cmd/etcd-operator

.PHONY: image
image: ## The operator's OCI image (IMAGE_PLATFORMS, no container daemon) under DIST; prints the OCI layout's directory last.
	@for p in $(IMAGE_PLATFORMS); do \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO_BUILD) -o bin/$${p/\//-}/etcd-operator ./cmd/etcd-operator >&2; \
	done
	@$(GO_TEST_MODULE) build -o $(CURDIR)/bin/image-builder ./cmd/image
	@bin/image-builder build -out $(DIST) -ref $(IMAGE):$(VERSION) -version $(VERSION) -revision "$(REVISION)" \
		$(foreach p,$(IMAGE_PLATFORMS),$(p)=bin/$(subst /,-,$(p))/etcd-operator)

.PHONY: release
release: ## One release of VERSION into DIST: the image (OCI layout, IMAGE:VERSION), install.yaml, the chart, the plugin's archives and krew manifest (test/cmd/release).
	$(GO_TEST_MODULE) run ./cmd/release build -root $(CURDIR) -out $(abspath $(DIST)) -version '$(VERSION)' -image '$(IMAGE)' \
		-revision '$(REVISION)' -image-platforms '$(IMAGE_PLATFORMS)' -plugin-platforms '$(PLUGIN_PLATFORMS)' \
		$(if $(PLUGIN_URL),-download-url '$(PLUGIN_URL)')

.PHONY: push
push: ## Push DIST's image to IMAGE:VERSION and its chart to CHART_REPO (PLAIN_HTTP=1: a registry without TLS).
	$(GO_TEST_MODULE) run ./cmd/release push -dist $(abspath $(DIST)) -version '$(VERSION)' -image '$(IMAGE)' \
		-chart-repo '$(CHART_REPO)' $(if $(PLAIN_HTTP),-plain-http)

.PHONY: plugin
plugin: ## Build the kubectl etcd plugin into bin/kubectl-etcd (put bin/ on PATH to use it).
	CGO_ENABLED=0 go build -ldflags "-X github.com/quorumkeeper/etcd-operator/internal/version.Version=$(VERSION) -X github.com/quorumkeeper/etcd-operator/internal/version.StampedRevision=$(REVISION)" -o bin/kubectl-etcd ./cmd/kubectl-etcd

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
	@CGO_ENABLED=0 $(GO_TEST_MODULE) build -o $(CURDIR)/bin/localcluster ./cmd/localcluster && bin/localcluster down

##@ Tests

TEST_TIERS = verify-generated lint test-unit test-chart test-api test-localcluster test-e2e robustness

.PHONY: test
test: ## Everything CI runs, tier by tier; each tier's time at the end.
	@hack/test-all.sh $(TEST_TIERS)

.PHONY: test-unit
test-unit: ## Unit tests, and the etcd layer (against every release in ETCD_TEST_VERSIONS) and the S3 store against real etcd and MinIO processes; the test module's checkers, image builder, release, commands, etcd simulator, and the docs held to the CRDs and code.
	hack/testbed.sh etcd >/dev/null
	hack/testbed.sh minio >/dev/null
	dirs=; for v in $(ETCD_TEST_VERSIONS); do d="$$(hack/testbed.sh etcd "$$v")"; dirs="$$dirs$${dirs:+:}$$d"; done; \
		ETCD_TEST_DIRS="$$dirs" go test $(GO_TEST_FLAGS) ./api/... ./internal/...
	$(GO_TEST_MODULE) test $(GO_TEST_FLAGS) ./robustness/... ./image/... ./release/... ./cmd/... ./bench/... ./etcdsim/... ./etcdload/... ./docs/...

.PHONY: test-chart
test-chart: ## helm lint and helm template of charts/etcd-operator, checked; its alert rules under promtool's unit tests.
	HELM="$$(hack/tool.sh helm)" PROMTOOL="$$(hack/tool.sh promtool)" $(GO_TEST_MODULE) test $(GO_TEST_FLAGS) ./chart/ ./monitoring/

.PHONY: test-localcluster
test-localcluster: ## The local cluster: its parts (as root), then the whole of it end to end.
	hack/testbed.sh kube >/dev/null
	hack/testbed.sh cert-manager >/dev/null
	hack/testbed.sh minio >/dev/null
	$(GO_TEST_MODULE) test $(GO_TEST_FLAGS) ./localcluster/ ./localcluster/netsetup/ ./localcluster/runtime/ \
		./localcluster/node/ ./localcluster/provisioner/ ./localcluster/netpolicy/
	@# One local cluster per machine: wait for whoever has it (hack/operator-up.sh takes the same lock).
	flock $(LOCALCLUSTER_LOCK) env LOCALCLUSTER_LOCK_HELD=1 $(GO_TEST_MODULE) test $(GO_TEST_FLAGS) -timeout 30m -v ./localcluster/e2e/ 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: test-api
test-api: ## CRD validation and defaults against a real kube-apiserver.
	KUBEBUILDER_ASSETS="$$(hack/testbed.sh envtest | tail -n1)" $(GO_TEST_MODULE) test $(GO_TEST_FLAGS) -v ./api/... 2>&1 | \
		grep -vE '^=== (RUN|PAUSE|CONT)' 

.PHONY: test-e2e
test-e2e: ## The operator, deployed from config/, on the local cluster; stops the cluster after.
	hack/e2e.sh

.PHONY: robustness
robustness: ## Faults injected while a recorded workload runs; checks linearizability, watches, lost writes, restores from the archive (one fault per scenario; make soak for the long form).
	hack/robustness.sh

.PHONY: soak
soak: ## The robustness scenarios' long form, not part of make test: ROBUSTNESS_TRIALS (30) faults per scenario, hours.
	ROBUSTNESS_TRIALS=$${ROBUSTNESS_TRIALS:-30} hack/robustness.sh

.PHONY: legacy-migrations
legacy-migrations: ## Not part of make test: migrate aenix and migrate cozystack against the real legacy operators, built from COZYSTACK_GIT (a git URL or directory with their v0.4.x and v0.5.4 tags).
	hack/legacy-migrations.sh

##@ Benchmarks

.PHONY: bench
bench: ## The snapshot bench, then operator vs. etcd started by hand, as ratios; API writes and memory at rest. Stops the local cluster after.
	hack/bench.sh

# The cluster counts of make bench-sweep (make's $(or) would split them at the commas).
SWEEP ?= 500,1000,2500,5000

.PHONY: bench-sweep
bench-sweep: ## The operator with SWEEP (500,1000,2500,5000) one-member clusters on a simulated node (test/etcdsim: no etcd processes), at rest at each count; then 500 deleted at once.
	BENCH_SNAPSHOT=0 BENCH_ARCHIVE=0 BENCH_FLAGS="-sweep $(SWEEP) $(BENCH_FLAGS)" hack/bench.sh

.PHONY: bench-snapshot
bench-snapshot: ## Snapshot and restore agents vs. etcdctl/mc/etcdutl by hand, as ratios, and their peak memory; real etcd and MinIO on loopback, no cluster.
	hack/bench-snapshot.sh

.PHONY: bench-archive
bench-archive: ## Point-in-time recovery figures: archive lag under a steady writer, archiver memory by segment count, restore of full + deltas vs. replaying by hand; a directory store and MinIO side by side; real etcd and MinIO, no cluster.
	hack/bench-archive.sh

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
