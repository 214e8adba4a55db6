# corral-vdi-portal: `make run` to try it, `make test` to test it.
BIN        := bin/corral-vdi-portal
GO         ?= go
GOFLAGS    ?=
# The timeout guards against a hang: the e2e package's tests (~37 min one
# after another on two cores) run as E2E_SHARDS processes (scripts/test-rest.sh).
TEST_FLAGS ?= -count=1 -timeout 60m
E2E_SHARDS ?= 2
.DEFAULT_GOAL := help

.PHONY: help deps test-deps assets generate build run test e2e bench bench-wan soak fuzz lint clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## install the Debian packages the portal needs
	@bash scripts/deps.sh

test-deps: ## install what the tests need too (Chromium)
	@bash scripts/deps.sh --test

assets: ## copy the pinned browser clients from npm into static/
	@bash scripts/assets.sh

generate: ## regenerate templ views
	$(GO) tool templ generate

build: assets ## build bin/corral-vdi-portal
	$(GO) build $(GOFLAGS) -o $(BIN) ./cmd/corral-vdi-portal

run: deps build ## build and start the portal on this machine (embedded default)
	CORRAL_VDI_BACKEND=$${CORRAL_VDI_BACKEND:-local} ./$(BIN) serve

# The packages that run with the race detector in make test: everything but
# those that drive real servers and desktops (kube, portal, local, the
# harnesses, e2e, soak), which would take several times as long.
RACE_PKGS := api auth cli connid console fanout handlers recording relay rfb snapshot static store vdi views
RACE_RE   := /($(subst $(eval) ,|,$(strip $(RACE_PKGS))))(/|$$)

test: test-deps assets lint testcluster vm-image encoder-rootfs ## install test needs and run every test (unit packages with -race, then the rest beside e2e in E2E_SHARDS processes)
	$(GO) test -race $(TEST_FLAGS) $(addprefix ./,$(addsuffix /...,$(RACE_PKGS)))
	GO=$(GO) TEST_FLAGS='$(TEST_FLAGS)' E2E_SHARDS=$(E2E_SHARDS) bash scripts/test-rest.sh '$(RACE_RE)'

e2e: test-deps assets vm-image ## run only the browser end-to-end tests
	$(GO) test $(TEST_FLAGS) -v ./e2e/

bench: test-deps assets ## run the benchmarks and print the report (needs what the tests need, and websockify)
	bash scripts/bench.sh

bench-wan: test-deps assets ## the consoles over shaped networks (LAN, 40 ms, 120 ms): the WAN table of make bench (root)
	bash scripts/bench-wan.sh

SOAK_SCALE ?= default
FUZZ_TIME  ?= 2m
soak: test-deps assets testcluster ## the proving ground: load, faults and fuzzing on the whole system (SOAK_SCALE=short|default; docs/reliability.md)
	SOAK_SCALE=$(SOAK_SCALE) $(GO) test -count=1 -timeout 40m -v -run '^TestSoak$$' ./soak/

fuzz: ## run every fuzz target for FUZZ_TIME each (default 2m)
	@set -e; for t in $$(sed -n 's/^\t{"\(\.\/[a-z]*\)", "\(Fuzz[A-Za-z]*\)"},$$/\1:\2/p' soak/fuzz_test.go); do \
		echo "fuzz: $${t#*:} in $${t%%:*} for $(FUZZ_TIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZ_TIME) "$${t%%:*}"; \
	done

lint: ## go vet, staticcheck, gofmt, a tidy go.mod, and fresh templ output
	$(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod: run go mod tidy and commit what it changes"; exit 1; }
	$(GO) tool staticcheck ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: run gofmt -w on the files above"; exit 1; }
	@$(GO) tool templ generate >/dev/null 2>&1
	@git diff --quiet -- views || { git --no-pager diff --stat -- views; echo "templ: generated views were stale; commit the regenerated files"; exit 1; }

clean: ## remove build outputs
	rm -rf bin dist

.PHONY: testcluster cluster run-cluster
testcluster: ## build (once; cached by version) the kube-apiserver and etcd the tests run against
	@bash scripts/testcluster.sh >/dev/null

cluster: testcluster ## start that kube-apiserver + etcd with deploy/rbac.yaml and print kubeconfigs
	$(GO) run ./internal/testcluster/cmd/testcluster

run-cluster: deps build testcluster ## the Kubernetes backend on this machine: test apiserver + KubeVirt stand-in + a demo pool, then the portal
	bash scripts/run-cluster.sh

.PHONY: vm-image
vm-image: ## build (once; cached by version) the tiny kernel + busybox image local vm pools boot
	@bash scripts/vm-image.sh >/dev/null

.PHONY: encoder-rootfs
encoder-rootfs: ## download and unpack (once; cached by package versions) the Debian packages of the kube backend's H.264 encoder image
	@bash scripts/encoder-rootfs.sh >/dev/null

.PHONY: release
release: ## VERSION=vX.Y.Z: dist/ gets the kube image and the H.264 encoder sidecar's image (OCI tarballs), install.yaml and the Helm chart pinned to its digest (CHART_REGISTRY=oci://… pushes the chart), an SBOM and SHA256SUMS
	VERSION=$(VERSION) bash scripts/release.sh

.PHONY: image-binary docs
image-binary: ## build the static binary both container images ship (the Dockerfile's build step, outside Docker)
	bash scripts/build-binary.sh

docs: ## regenerate docs/configuration.md from the settings table (portal/config_table.go)
	$(GO) test ./portal -run TestConfigReference -update -count=1
