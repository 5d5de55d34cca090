# drill: make help lists the targets.

GO       ?= go
# bash: make test's recipe needs pipefail.
SHELL    := /bin/bash
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X github.com/drillhq/drill/internal/app.version=$(VERSION)
FUZZTIME ?= 10s
DEMO_SCENARIOS := scenarios/orders-db-brownout.yaml scenarios/payment-tax-brownout.yaml
N        ?= 5
BENCH_ARGS ?=
SEEDS    := $(wildcard scenarios/*.yaml scenarios/compose/*.yaml)
# staticcheck at a pinned version, run through the module proxy (go run
# builds it once into the build cache; nothing is installed).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.DEFAULT_GOAL := help
.PHONY: build image test demo bench fidelity lint compose-images claims help

build: ## Build bin/drill (static, trimmed paths, version stamped)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/drill ./cmd/drill

IMAGE    ?= drill:$(VERSION)

image: build ## Build the FROM scratch image of bin/drill (IMAGE=registry/drill:tag; load.image of load workers)
	docker build -f build/Dockerfile -t $(IMAGE) .

# Packages are tested one at a time (-p 1): several run timed drills, and
# a drill that shares the 2 cores with another package's tests comes back
# INVALID, which fails the gate after one rerun.
# make test pipes each go test -json through tools/testsum, which prints
# what go test prints (plus a PASS line for every test of 5 s or more) and
# records skipped tests and reruns in $(SKIPS); the last line counts and
# names them, pass or fail.
# build/prebuild.sh builds Traefik and the Kubernetes binaries meanwhile, in
# a cpu cgroup that gets only idle CPU, so that their first builds (most of
# a cold run) overlap lint and the timed drills instead of adding to them;
# make test stops it on the way out and prints its timings.
TESTSUM := $(CURDIR)/bin/testsum

# The end-to-end packages, in the order make test runs them (-p 1): the
# drills and drill-as-a-child tests first, so that the Kubernetes control
# plane and node parts build on idle CPU beside them (build/prebuild.sh)
# before test/cluster and test/node need them. A new package under test/
# must be added here; docs TestMakefileListsE2EPackages checks.
E2E_PACKAGES := ./test/drills ./test/e2e ./test/cluster ./test/node
SKIPS   := $(CURDIR)/bin/test-skips.jsonl

test: ## make lint, unit tests, end-to-end tests one package at a time (drill as a child, drill pairs, real control plane and node), short fuzz, with Traefik and Kubernetes prebuilt on idle CPU; ends with a line naming every skip and rerun
	@mkdir -p bin && rm -f $(SKIPS)
	@set -o pipefail; status=0; \
	GO=$(GO) TRAEFIK_VERSION=$(TRAEFIK_VERSION) ./build/prebuild.sh start; \
	trap './build/prebuild.sh stop' EXIT; \
	run() { echo "==> $$*"; "$$@" 2>&1 | $(TESTSUM) -record $(SKIPS); }; \
	$(MAKE) --no-print-directory lint && \
	$(GO) build -o $(TESTSUM) ./tools/testsum && \
	run $(GO) test -json -p 1 -timeout 30m ./cmd/... ./internal/... ./docs/... ./bench/... ./tools/... && \
	run $(GO) test -json -p 1 -timeout 75m $(E2E_PACKAGES) && \
	(cd test/controlplane && run $(GO) test -json -timeout 30m ./...) && \
	run $(GO) test -json -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./internal/scenario || status=$$?; \
	trap - EXIT; ./build/prebuild.sh stop; \
	[ -x $(TESTSUM) ] && $(TESTSUM) -summary $(SKIPS); exit $$status

demo: build ## Build, then run the PostgreSQL brownout and the tax brownout drills locally
	@status=0; for s in $(DEMO_SCENARIOS); do \
		echo "==> bin/drill run $$s"; \
		bin/drill run $$s || status=$$?; \
	done; exit $$status

bench: ## Run the load engine and console benchmarks (bench/run.sh $(BENCH_ARGS), e.g. --long, --only=console), then drill history over 365 nights
	./bench/run.sh $(BENCH_ARGS)
	$(GO) test ./internal/history -run '^$$' -bench 'HistoryYear' -benchtime 3x

fidelity: compose-images ## Run each seed drill (and the Compose pair) N times (default 5: N=20 make fidelity) and tabulate valid, right and wrong verdicts, INVALID and lag
	$(GO) run ./bench/fidelity -n $(N) -drill bin/drill -tsv reports/fidelity-runs.tsv $(SEEDS)

# Traefik for the compose drills, built from its Go module at this version
# (build/traefik.sh caches the binary per version under ~/.cache/drill).
TRAEFIK_VERSION ?= v3.6.12

compose-images: build ## Build the compose drills' images: drill-reference:local (FROM scratch, bin/drill) and drill-traefik:$(TRAEFIK_VERSION) (Traefik from its module, cached per version)
	rm -rf bin/compose-context && mkdir -p bin/compose-context
	cp bin/drill scenarios/compose/adr-0077/Dockerfile bin/compose-context/
	docker build -t drill-reference:local bin/compose-context
	rm -rf bin/traefik-context && mkdir -p bin/traefik-context
	traefik=$$(GO=$(GO) ./build/traefik.sh $(TRAEFIK_VERSION)) && cp "$$traefik" bin/traefik-context/traefik
	cp build/traefik.Dockerfile bin/traefik-context/Dockerfile
	docker build -t drill-traefik:$(TRAEFIK_VERSION) bin/traefik-context

claims: ## Regenerate docs/CLAIMS.md, the claims ledger, from docs/claims/claims.yaml, ../shared/specs and the shipped scenarios
	$(GO) run ./tools/claims

lint: ## Check formatting (gofmt), go vet and staticcheck (pinned: STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'
