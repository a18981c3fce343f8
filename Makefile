# Nexo Edge — build, generate and test.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

CONTROLLER_TOOLS_VERSION ?= v0.23.0
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
# -trimpath keys the Go build cache by module and version instead of by folder, and cgo is off as
# in the release builds: a second clone (CI's) finds this module's packages compiled, and the
# tests, the linux/amd64 release build, 0.2.0's build from source and the cluster tools compile
# what they share once (docs/development.md, "CI time"). Only the race detector needs cgo.
export GOFLAGS := -buildvcs=false -trimpath
export CGO_ENABLED := 0
# The Manager reports "<version>+<stamp>-<commit>" (a build id such as "0.2.0+20260613.371-384b887").
BUILD_STAMP ?= $(shell date -u +%Y%m%d.%H%M)
BUILD_COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)
BUILDINFO := github.com/nexo-io/nexo-edge/contract/buildinfo

.PHONY: all
all: build

##@ Generate

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for api/v1alpha1 and the operator's RBAC markers (from the catalog and render.Children).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	go run ./hack/rbacmarkers

# prometheus-operator's API (go.mod pins it): the CRDs of the monitoring kinds Nexo Edge ships, for
# the tests that install them as a cluster with prometheus-operator (or OpenShift) has them.
MONITORING_API := github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1

.PHONY: manifests
manifests: generate ## Generate CRDs, then stamp them from the catalog (labels, keep annotation, docs); prometheus-operator's CRDs for the tests; then the runtime contract's JSON Schemas and examples (docs/runtime).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=nexo-operator paths=./controllers/... paths=./operator/... output:rbac:artifacts:config=config/rbac/generated
	go run ./hack/crdmeta
	@tmp=$$(mktemp -d) && $(CONTROLLER_GEN) crd:crdVersions=v1,maxDescLen=0 paths=$(MONITORING_API) output:crd:dir=$$tmp && \
	  for k in prometheusrules servicemonitors podmonitors; do cp $$tmp/monitoring.coreos.com_$$k.yaml test/framework/monitoring/; done; rm -rf $$tmp
	go run ./hack/runtimeschema
	go test -count=1 -run '^TestRuntimeContractExamples$$' ./controllers/render/ -args -update

.PHONY: chart
chart: manifests ## Copy CRDs and operator RBAC from config/ into charts/nexo-edge.
	go run ./hack/genpkg chart

.PHONY: bundle
bundle: manifests ## Generate the OLM bundle, bundle.Dockerfile and the file-based catalog from config/ (through a temp dir).
	go run ./hack/genpkg bundle

.PHONY: changelog
changelog: manifests ## Write the schema section of every version in CHANGELOG.md (nexoctl schema diff against the release before it).
	go run ./hack/changelog

GENERATED := api config docs charts bundle bundle.Dockerfile olm PROJECT CHANGELOG.md test/framework/monitoring

.PHONY: verify-generated
verify-generated: generate manifests chart bundle changelog ## Fail when any generated file differs from what is committed.
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
	  echo "generated files are stale; run 'make generate manifests chart bundle changelog' and commit:"; \
	  git status --porcelain -- $(GENERATED); git --no-pager diff --stat -- $(GENERATED); exit 1; fi

# Kept per machine beside the cluster tools (hack/build-tools.sh), so a new clone copies it.
TOOLS_CACHE ?= $(or $(NEXO_TOOLS_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/nexo-edge/cluster-tools)
$(CONTROLLER_GEN):
	@mkdir -p $(BIN) $(TOOLS_CACHE)
	@if [ ! -x $(TOOLS_CACHE)/controller-gen-$(CONTROLLER_TOOLS_VERSION) ]; then \
	  GOBIN=$(BIN)/.controller-gen go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION) && \
	  mv $(BIN)/.controller-gen/controller-gen $(TOOLS_CACHE)/controller-gen-$(CONTROLLER_TOOLS_VERSION) && rmdir $(BIN)/.controller-gen; fi
	cp $(TOOLS_CACHE)/controller-gen-$(CONTROLLER_TOOLS_VERSION) $@

##@ Build

.PHONY: build
build: ## Build the product binaries (and the demo supervisor) into bin/.
	go build -ldflags "-X $(BUILDINFO).Stamp=$(BUILD_STAMP) -X $(BUILDINFO).Commit=$(BUILD_COMMIT)" -o $(BIN)/ ./cmd/...
	go build -o $(BIN)/nexo-demo ./hack/demo

.PHONY: images
images: ## Build the operator, Manager and Control Plane images (linux/amd64, linux/arm64) into the OCI layout dist/oci; reproducible per commit.
	go run ./hack/release images -out dist/oci

.PHONY: publish-images
publish-images: ## Build the images from a clean tree, push them to REGISTRY with SBOM referrers, write dist/release.json (VERSION=x.y.z REGISTRY=host/path).
	go run ./hack/release publish-images -version "$(VERSION)" -registry "$(REGISTRY)" -out dist/release.json

.PHONY: release
release: ## Release VERSION: publish-images, push the bundle image, keep releases/VERSION with every image by digest, regenerate the catalog (REGISTRY=host/path; PUSH_TO=127.0.0.1:PORT for a stand-in).
	go run ./hack/release release -version "$(VERSION)" -registry "$(REGISTRY)" -push-to "$(PUSH_TO)"

.PHONY: fmt
fmt: ## Check gofmt and run go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

##@ Test

.PHONY: cluster-tools
cluster-tools: ## Build etcd, kube-apiserver, controller-manager, scheduler, kubectl and kwok into bin/ (once).
	hack/build-tools.sh

# Kubernetes versions the chart is rendered for: the cluster tools' (hack/build-tools.sh) and the
# oldest supported (catalog.MinKubernetesVersion). Without --kube-version, helm renders as
# Kubernetes 1.20, which the chart's kubeVersion refuses.
CHART_KUBE_VERSIONS ?= 1.37.2 1.30.0

.PHONY: chart-lint
chart-lint: cluster-tools ## helm lint --strict and helm template of the chart for each of CHART_KUBE_VERSIONS.
	@for v in $(CHART_KUBE_VERSIONS); do \
	  $(BIN)/helm lint --strict --quiet --kube-version $$v charts/nexo-edge --set manager.controlPlaneURL=https://cp.example.com || exit 1; \
	  $(BIN)/helm template nexo-edge charts/nexo-edge --namespace nexo-system --kube-version $$v --set manager.controlPlaneURL=https://cp.example.com > /dev/null || exit 1; \
	  echo "chart-lint: the chart lints strictly and renders for Kubernetes $$v"; \
	done

.PHONY: test
test: cluster-tools chart-lint ## Run every test against a real API server (builds the cluster binaries on first use); the fault suites are make test-reliability's.
	NEXO_TEST_BIN=$(BIN) go test -count=1 -timeout 30m $$(go list ./... | grep -v -e /test/reliability -e /test/olm -e /hack/release)
	CGO_ENABLED=1 go test -count=1 -race -timeout 10m ./controlplane/... # concurrent deploys against one entitlement, under the race detector

.PHONY: test-release
test-release: ## Build images twice (reproducible), publish one to an in-process registry and pull it back (hack/release); apart from make test, as it cross-compiles.
	go test -count=1 -timeout 30m ./hack/release/

# Real OLM, built once per machine from the snapshot in OLM_TOOLS (12-30 minutes cold).
# Beside the repository (../shared), else this machine's shared folder for a clone made elsewhere.
OLM_TOOLS ?= $(firstword $(wildcard $(CURDIR)/../shared/tools/olm /work/shared/tools/olm) $(CURDIR)/../shared/tools/olm)

.PHONY: test-olm
test-olm: cluster-tools ## Install the bundle through real OLM in the AllNamespaces, OwnNamespace, SingleNamespace and MultiNamespace modes (a signed deploy, the effective RBAC of docs/rbac.md), and upgrade the previous release to this build through an InstallPlan.
	NEXO_TEST_BIN=$(BIN) OLM_TOOLS=$(OLM_TOOLS) go test -count=1 -timeout 40m -v -run 'TestInstallModes|TestUpgrade' ./test/olm/

# Fuzz targets (package:target); their seed corpora (f.Add and testdata/fuzz) also run in make test.
FUZZ_TARGETS := contract/signature:FuzzSignVerify contract/license:FuzzParse contract/connecttoken:FuzzParse contract/manifest:FuzzRead \
	controlplane:FuzzRequests preflight:FuzzOffline controllers:FuzzResolveGraph controllers/render:FuzzRender manager:FuzzCommands
FUZZTIME ?= 10s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (CI: 5s; longer by hand, e.g. FUZZTIME=10m).
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
	  go test ./$$pkg/ -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) 2>&1 | grep -v '^fuzz: elapsed' | tail -3; \
	  test $${PIPESTATUS[0]} -eq 0; \
	done

.PHONY: align-tools
align-tools: ## Raise the modules the Kubernetes and Helm tools modules share with the product to the product's versions (after a dependency change), so the build cache holds them once.
	hack/align-tools.sh

.PHONY: prebuild
prebuild: ## Compile what test-release, test-olm and test-reliability build (and make test's -race run), filling the build caches; .ci/run runs it in the background at the lowest priority.
	FUZZ_TARGETS="$(FUZZ_TARGETS)" OLM_TOOLS=$(OLM_TOOLS) hack/prebuild.sh run

.PHONY: test-reliability
test-reliability: cluster-tools ## Inject faults, fuzz every target, print the reliability report (LONG=1: 1000 proxies, 20 kills, 2m per fuzz target; SEED=N).
	FUZZ_TARGETS="$(FUZZ_TARGETS)" hack/test-reliability.sh

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Demo

CLUSTER ?= local
.PHONY: demo
demo: cluster-tools build ## Run all of Nexo Edge on a local cluster (CLUSTER=existing uses $$KUBECONFIG); stays up until make demo-down.
	CLUSTER=$(CLUSTER) hack/demo.sh up

.PHONY: demo-down
demo-down: ## Stop everything make demo started (by pid) and remove .demo.
	CLUSTER=$(CLUSTER) hack/demo.sh down

.PHONY: demo-check
demo-check: ## Assert on nexoctl status/preflight -o json against the running demo (CI).
	hack/demo.sh check

##@ Benchmark

.PHONY: bench-heartbeat
bench-heartbeat: cluster-tools ## The Manager's heartbeat bytes and memory at 1,000, 5,000 and 20,000 owned proxies (test/scale).
	NEXO_TEST_BIN=$(BIN) go test -count=1 -timeout 30m -run '^$$' -bench Heartbeat -benchtime 1x ./test/scale/

.PHONY: bench-changes
bench-changes: cluster-tools ## A preview over 1,000 proxies (Manager time, answer bytes) and a promotion to 100 environments (Control Plane time).
	go test -count=1 -timeout 30m -run '^$$' -bench Preview1000Proxies -benchtime 1x ./test/scale/
	go test -count=1 -run '^$$' -bench PromoteTo100Environments -benchtime 5x ./controlplane/

BENCH_N ?= 1000
.PHONY: bench
bench: cluster-tools build ## Benchmark the operator on the full local cluster (BENCH_N proxies) and print the numbers.
	go run ./hack/bench -n $(BENCH_N) -operator $(BIN)/operator
