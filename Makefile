# gitfleet — `make help` lists the targets.
SHELL := /bin/bash
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

GO        ?= go
BIN       := bin/gitfleet
DEMO      ?= .gitfleet/demo
# Fuzz budgets are execution counts, not durations: Go's fuzz coordinator
# can report a duration's deadline as a failure ("context deadline
# exceeded") when a starved worker has not answered by then. Each count is
# 5-15 s here; FUZZTIME=10m (or 1000000x) overrides them all.
FUZZTIME  ?=
FUZZMIN   ?= 3s
BENCHTIME ?= 1x

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## check the toolchain and fetch the Go modules
	@command -v $(GO) >/dev/null || { echo "Go $$(sed -n 's/^go //p' go.mod) is required: https://go.dev/dl/"; exit 1; }
	@command -v git >/dev/null || { echo "installing git"; apt-get update -qq && apt-get install -y -qq git; }
	@echo "go mod download: modules not yet in the cache are listed as they are fetched (the first time, a few minutes)"
	@set -o pipefail; $(GO) mod download -x 2>&1 | sed -un 's|^# get https://[^/]*/\(.*\)/@v/\(.*\)\.zip$$|  \1 \2|p' || $(GO) mod download

.PHONY: build
build: deps ## build bin/gitfleet (lists the packages it compiles: many on a first build)
	$(GO) build -v -ldflags "-X main.commit=$$(git rev-parse --short HEAD 2>/dev/null)" -o $(BIN) ./cmd/gitfleet

.PHONY: run
run: build ## make a demo fleet under .gitfleet/demo (once) and run gitfleet up on it
	@[ -d $(DEMO) ] || ./$(BIN) init $(DEMO)
	./$(BIN) validate $(DEMO)
	./$(BIN) up --repo $(DEMO) --data-dir .gitfleet/data

.PHONY: test
test: deps chromium ## run every test with -race (with a short browser test where Chromium runs), then short fuzz runs
	$(GO) test -race -count=1 -timeout 15m $$($(GO) list ./... | grep -v '/faults$$')
	@# The fault suite's short scenarios time real processes converging: run
	@# alone, not beside the end-to-end tests' own nodes on the same 2 cores.
	$(GO) test -race -count=1 -timeout 15m ./faults
	$(GO) test -run '^$$' -fuzz '^FuzzValidate$$' -fuzztime $(or $(FUZZTIME),4000x) -fuzzminimizetime $(FUZZMIN) ./schemas
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRecord$$' -fuzztime $(or $(FUZZTIME),30000x) -fuzzminimizetime $(FUZZMIN) ./reconciler
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeInventory$$' -fuzztime $(or $(FUZZTIME),20000x) -fuzzminimizetime $(FUZZMIN) ./reconciler
	$(GO) test -run '^$$' -fuzz '^FuzzEncodeInventory$$' -fuzztime $(or $(FUZZTIME),20000x) -fuzzminimizetime $(FUZZMIN) ./schemas/wire
	$(GO) test -run '^$$' -fuzz '^FuzzFastYAML$$' -fuzztime $(or $(FUZZTIME),50000x) -fuzzminimizetime $(FUZZMIN) ./schemas
	$(GO) test -run '^$$' -fuzz '^FuzzPrecheck$$' -fuzztime $(or $(FUZZTIME),30000x) -fuzzminimizetime $(FUZZMIN) ./schemas
	$(GO) test -run '^$$' -fuzz '^FuzzValueCodec$$' -fuzztime $(or $(FUZZTIME),30000x) -fuzzminimizetime $(FUZZMIN) ./schemas
	$(GO) test -run '^$$' -fuzz '^FuzzPolicyProjection$$' -fuzztime $(or $(FUZZTIME),5000x) -fuzzminimizetime $(FUZZMIN) ./schemas
	$(GO) test -run '^$$' -fuzz '^FuzzLinesFromEncoding$$' -fuzztime $(or $(FUZZTIME),30000x) -fuzzminimizetime $(FUZZMIN) ./schemas
	$(GO) test -run '^$$' -fuzz '^FuzzNativeLeaves$$' -fuzztime $(or $(FUZZTIME),20000x) -fuzzminimizetime $(FUZZMIN) ./schemas
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeDirect$$' -fuzztime $(or $(FUZZTIME),20000x) -fuzzminimizetime $(FUZZMIN) ./schemas
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeCluster$$' -fuzztime $(or $(FUZZTIME),20000x) -fuzzminimizetime $(FUZZMIN) ./providers/inmemory

.PHONY: faults
faults: deps ## run every fault scenario with real processes and print the lost/duplicated table
	FAULTS=all $(GO) test -count=1 -timeout 20m -v -run '^TestFaults$$' ./faults

# The benchmarks behind issue 14's figures, for bench-table; BENCH_SIZES are
# the fleet sizes (clusters) of the whole-process rows (none: skip them).
BENCH_TABLE ?= ^(BenchmarkCommitToFirstTask|BenchmarkVersionBump1000|BenchmarkVersionBump1000Bootstrap|BenchmarkDaemonMemory10k|BenchmarkRestartFirstPlan10k)$$
BENCH_SIZES ?= 1000,10000

# cue, of the version go.mod requires, for the cue vet beside gitfleet validate
# (installed with go install pkg@version: it stays out of go.mod).
bin/cue: go.mod
	GOBIN=$(CURDIR)/bin $(GO) install cuelang.org/go/cmd/cue@$$($(GO) list -m -f '{{.Version}}' cuelang.org/go)

# OpenTofu, Terraform's fork, for the plan beside gitfleet plan's in the
# table (internal/benchtable/tofu.go says why not Terraform). Its go.mod
# has a replace directive, which go install refuses: it is built in its
# module's folder in the module cache (a few minutes the first time).
TOFU_VERSION ?= v1.10.10
bin/tofu:
	@mkdir -p bin
	dir=$$(cd / && $(GO) mod download -json github.com/opentofu/opentofu@$(TOFU_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	test -n "$$dir" && cd "$$dir" && GOFLAGS=-mod=readonly $(GO) build -o $(CURDIR)/bin/tofu ./cmd/tofu

.PHONY: bench
bench: deps bin/cue bin/tofu ## run every benchmark, then print issue 14's figures as one table beside their goals
	@mkdir -p bin; set -o pipefail; \
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 60m ./... | tee bin/bench.out; st=$$?; \
	$(GO) run ./internal/benchtable -build -gotest bin/bench.out -sizes $(BENCH_SIZES) || st=1; exit $$st

.PHONY: bench-table
bench-table: deps bin/cue bin/tofu ## only the table of make bench: its daemon benchmarks and whole-process rows
	@mkdir -p bin; set -o pipefail; \
	$(GO) test -run '^$$' -bench '$(BENCH_TABLE)' -benchmem -benchtime $(BENCHTIME) -timeout 60m ./reconciler | tee bin/bench-table.out; st=$$?; \
	$(GO) run ./internal/benchtable -build -gotest bin/bench-table.out -sizes $(BENCH_SIZES) || st=1; exit $$st

# Container images, built locally from static binaries (FROM scratch):
# nothing is pulled from a registry.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
FLEET_REPO ?= $(CURDIR)/.gitfleet/compose-fleet
SECRETS_KEY ?= $(CURDIR)/.gitfleet/compose-secrets.key

.PHONY: images
images: deps ## build the gitfleet:dev, gitfleet-node:dev and gitfleet-nats:dev images from static binaries
	@mkdir -p bin/images
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.commit=$$(git rev-parse --short HEAD 2>/dev/null)" -o bin/images/gitfleet ./cmd/gitfleet
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o bin/images/nats-server github.com/nats-io/nats-server/v2
	docker build -q -t gitfleet:dev -f deploy/images/gitfleet.Dockerfile bin/images
	docker build -q -t gitfleet-nats:dev -f deploy/images/nats.Dockerfile bin/images
	docker build -q -t gitfleet-node:dev -f deploy/images/node.Dockerfile bin/images

.PHONY: compose-up
compose-up: images build ## run deploy/compose: a 3-node NATS cluster, two daemons, three workers, on $(FLEET_REPO)
	@[ -d $(FLEET_REPO) ] || ./$(BIN) init $(FLEET_REPO)
	@[ -f $(SECRETS_KEY) ] || (umask 077; head -c 32 /dev/urandom | base64 > $(SECRETS_KEY))
	FLEET_REPO=$(FLEET_REPO) SECRETS_KEY=$(SECRETS_KEY) $(COMPOSE) -f deploy/compose/docker-compose.yaml -p gitfleet up -d
	@echo "the daemons: http://127.0.0.1:18080/readyz and http://127.0.0.1:18081/readyz"

.PHONY: compose-down
compose-down: ## stop and remove the deploy/compose stack
	FLEET_REPO=$(FLEET_REPO) SECRETS_KEY=$(SECRETS_KEY) $(COMPOSE) -f deploy/compose/docker-compose.yaml -p gitfleet down -v

.PHONY: compose-test
compose-test: images ## run the compose stack, kill a NATS server and a daemon during a rollout, count machines
	COMPOSE_TEST=1 COMPOSE="$(COMPOSE)" $(GO) test -count=1 -timeout 20m -v -run '^TestCompose$$' ./deploy

.PHONY: docker-test
docker-test: deps ## run the demo fleet as containers (docker provider) end to end: join, address, docker rm -f, refused intruders
	DOCKER_TEST=1 $(GO) test -count=1 -timeout 20m -v -run '^TestDockerFleet$$' ./cmd/gitfleet

.PHONY: chromium
chromium: ## install Debian's chromium for the browser tests, if missing
	@command -v chromium >/dev/null || apt-get install -y -q chromium >/dev/null || echo "chromium could not be installed: the browser tests will skip"

.PHONY: browser-test
browser-test: deps chromium ## drive a headless Chromium over the dashboard of gitfleet up on the demo fleet
	BROWSER_TEST=1 $(GO) test -count=1 -timeout 20m -v -run '^TestDashboardInABrowser$$' ./cmd/gitfleet

.PHONY: screenshots
screenshots: deps chromium ## the browser test, keeping its screenshots in docs/images for docs/dashboard.md
	@mkdir -p docs/images
	BROWSER_TEST=1 SCREENSHOTS=$(CURDIR)/docs/images $(GO) test -count=1 -timeout 20m -v -run '^TestDashboardInABrowser$$' ./cmd/gitfleet

.PHONY: verify
verify: ## fail on unformatted code, vet findings or an untidy go.mod
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	$(GO) vet ./...
	$(GO) mod tidy
	@git diff --exit-code -- go.mod go.sum || { echo "go mod tidy changed go.mod/go.sum"; exit 1; }

.PHONY: stop
stop: ## stop the demo's machines (gitfleet up leaves its local nodes running when it stops)
	@[ ! -x $(BIN) ] || ./$(BIN) node stop --data-dir .gitfleet/data

.PHONY: demo-check
demo-check: build ## run the README's demo as written on a fresh demo fleet and check what it says
	DEMO_CHECK=1 $(GO) test -count=1 -timeout 15m -v -run '^TestREADMEDemo$$' ./cmd/gitfleet

.PHONY: clean
clean: stop ## stop the demo's machines, remove build output and the demo fleet
	rm -rf bin .gitfleet
