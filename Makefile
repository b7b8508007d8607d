# The Makefile is the contract: `make help` lists what it offers.
SHELL := bash
.DEFAULT_GOAL := help

GO ?= go
STATICCHECK_VERSION := v0.8.2
TEST_FLAGS ?= -count=1 -timeout=30m
KUBE_BIN := $(shell deploy/local/build-kube.sh --print-dir)
export METALAMBDA_KUBE_BIN := $(KUBE_BIN)

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The version the commands report (--version) and the images are tagged with.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
VERSION_LDFLAGS := -X github.com/metalambda/metalambda/internal/version.version=$(VERSION)
IMAGE_REPO ?= ghcr.io/metalambda
DOCKER ?= docker

.PHONY: web
web: ## Rebuild the dashboard's scripts and stylesheet (web/static/) from web/src/ with npm ci and esbuild.
	@command -v npm >/dev/null || { echo "web: npm not found; install Node.js 20 or later (Debian: apt-get install nodejs npm)" >&2; exit 1; }
	cd web && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build

.PHONY: web-check
web-check: web ## Prove the committed web/static/ is what web/src/ and the lockfile build.
	@git diff --exit-code --stat -- web/static || { echo "web-check: web/static/ differs from what web/src/ builds: run make web and commit web/static/" >&2; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- web/static); \
	  if [[ -n $$untracked ]]; then echo "web-check: built files not committed: $$untracked" >&2; exit 1; fi

.PHONY: build
build: web ## Rebuild the dashboard's assets, compile every package and put the commands in bin/.
	$(GO) build ./...
	$(GO) build -ldflags "$(VERSION_LDFLAGS)" -o bin/ ./cmd/...
# The launcher, started for every sandboxed process, and the worker executables,
# every JavaScript or Jsonnet worker, are static, as in the image: no dynamic
# loader or libc to map and relocate, which saves each start about 0.7 ms. Each
# runtime's worker is built without the other runtime, whose packages it would
# initialize at every start (metalambda-worker, with both, is the fallback).
	CGO_ENABLED=0 $(GO) build -ldflags "$(VERSION_LDFLAGS)" -o bin/ ./cmd/metalambda-launcher ./cmd/metalambda-worker
	CGO_ENABLED=0 $(GO) build -tags nojsonnet -ldflags "$(VERSION_LDFLAGS)" -o bin/metalambda-worker-javascript ./cmd/metalambda-worker
	CGO_ENABLED=0 $(GO) build -tags nojavascript -ldflags "$(VERSION_LDFLAGS)" -o bin/metalambda-worker-jsonnet ./cmd/metalambda-worker

.PHONY: images
images: ## Build the engine and gateway images as $(IMAGE_REPO)/<name>:$(VERSION) (needs docker or DOCKER=podman).
	@command -v $(DOCKER) >/dev/null || { echo "images: $(DOCKER) not found; set DOCKER=podman or run: $(DOCKER) build -f deploy/images/engine.Dockerfile ." >&2; exit 1; }
	for name in engine gateway; do \
	  $(DOCKER) build -f deploy/images/$$name.Dockerfile --build-arg VERSION=$(VERSION) -t $(IMAGE_REPO)/$$name:$(VERSION) . || exit 1; \
	done

UP_FLAGS ?=

.PHONY: setup
setup: ## Install the system packages the platform and the tests need (Debian-like hosts, as root), or say how.
	@hack/setup-host.sh

.PHONY: up
up: setup build kube ## Run the whole platform on this machine (Ctrl-C or `bin/metalambda down` stops it).
	bin/metalambda up $(UP_FLAGS)

.PHONY: down
down: ## Stop a platform started with `make up`.
	bin/metalambda down

.PHONY: kube
kube: ## Build the pinned control plane (etcd, kube-*) into the cache, unless already there.
	@deploy/local/build-kube.sh >/dev/null

# Three test levels. Unit tests need nothing; integration tests (files tagged
# integration) start a control plane per package; end-to-end tests are the slow
# whole-platform ones: the local platform (with its node), the dashboard's browser
# tests on a whole platform, the install of deploy/ with the components' own
# accounts, the operators through the engine and the gateway, and the soak's
# two-minute form (hack/soak: the platform in-cluster under load and faults).
E2E_PKGS := ./internal/local/platform ./internal/gateway/dashboard ./deploy ./operators ./hack/soak
# The packages that have integration-tagged files, less the end-to-end ones.
INTEGRATION_PKGS = $(filter-out $(E2E_PKGS),$(sort $(patsubst %/,./%,$(dir $(shell git grep -l '^//go:build integration' -- '*_test.go')))))

# make test runs every level in one go test over every package, so that packages
# run in parallel as they always have, rather than one level after the other.
.PHONY: test
test: setup kube ## Every level: unit, integration and end-to-end tests on a real control plane (the README's test command).
	@hack/test.sh $(TEST_FLAGS) -tags integration ./...

.PHONY: test-unit
test-unit: ## Unit tests only: no control plane needed.
	@hack/test.sh $(TEST_FLAGS) ./...

.PHONY: test-integration
test-integration: setup kube ## Integration tests (and the unit tests of their packages) on a real control plane, without the end-to-end packages.
	@hack/test.sh $(TEST_FLAGS) -tags integration $(INTEGRATION_PKGS)

.PHONY: test-e2e
test-e2e: setup kube ## End-to-end tests: the slow whole-platform packages (local platform, dashboard, deploy, operators); the local node needs root.
	@hack/test.sh $(TEST_FLAGS) -tags integration $(E2E_PKGS)

SOAK_DURATION ?= 10m
SOAK_FLAGS ?=

.PHONY: soak
soak: setup kube ## Chaos soak: the platform in-cluster under load for SOAK_DURATION while its parts are killed at random; fails when a target of docs/reliability.md is missed (needs root).
	$(GO) run ./hack/soak -duration $(SOAK_DURATION) $(SOAK_FLAGS)

BENCH_SIZES ?= 1000,5000
BENCH_FUNCTIONS ?= 1000

.PHONY: bench
bench: build kube ## Benchmarks: engine convergence, resync cost and memory; gateway hook throughput, cold starts and memory per Function, warm hits over replicas; Go micro-benchmarks.
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...
	$(GO) run ./hack/bench-gateway -duration 5s -clients 16
	$(GO) run ./hack/bench-density -n $(BENCH_FUNCTIONS)
	$(GO) run ./hack/bench-replicas -n 300 -replicas 3
	$(GO) run ./hack/bench-platform -runs 5 -cold-runs 10
	$(GO) run ./hack/bench-engine -engine bin/engine -n $(BENCH_SIZES)

.PHONY: bench-scale
bench-scale: build kube ## Engine at 10,000 parents x 3 children: convergence, CPU, RSS and a full resync.
	$(GO) run ./hack/bench-engine -engine bin/engine -n 10000 -unrelated 0 -defaults-n 0 -resync-seconds 120

.PHONY: lint
lint: ## gofmt, go vet and staticcheck (config: staticcheck.conf).
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [[ -n $$unformatted ]]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -tags integration ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags integration ./...
# The worker executables of make build leave one runtime out; their tests need both.
	$(GO) vet -tags nojsonnet ./cmd/metalambda-worker
	$(GO) vet -tags nojavascript ./cmd/metalambda-worker
