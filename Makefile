# Sluice — see README.md. Every target works on a fresh machine: tools it needs
# are checked by scripts/ and installed or named when missing.
SHELL := /bin/bash
GO ?= go
MODULES := api controlplane dataplane etcdwatch migrations
# deploy/check is a module outside go.work (its k8s.io/api, Helm and
# Prometheus dependencies stay out of the workspace's build list): vet and
# test it with GOWORK=off.
CHECK_MODULE := deploy/check
BIN := bin
export GOFLAGS ?= -buildvcs=false

.PHONY: all build dist web test run vet-work bench bench-sdk bench-proxy bench-proxy-dedicated bench-scaling bench-insn bench-web pgo-profile lint fmt vet clean

all: build

build: web
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/sluice-gateway ./dataplane/cmd/sluice-gateway
	$(GO) build -o $(BIN)/demo-upstream ./dataplane/cmd/demo-upstream
	$(GO) build -o $(BIN)/sluice-admin ./controlplane/cmd/sluice-admin
	$(GO) build -o $(BIN)/sluicectl ./controlplane/cmd/sluicectl
	$(GO) build -o $(BIN)/orders-example ./dataplane/sdk/example/orders

# dist builds the release binaries into dist/: static (CGO off), stripped,
# -trimpath, with the build stamped into package api/buildinfo (shown by
# --version, sluicectl version, and the Build column of the console's Nodes
# page), and dist/SHA256SUMS. VERSION, COMMIT and DATE may be given
# (make dist VERSION=v1.2.0); by default they come from git.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
BUILDINFO := github.com/sluicegw/sluice/api/buildinfo
DIST_LDFLAGS = -s -w -X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Commit=$(COMMIT) -X $(BUILDINFO).Date=$(DATE)

dist: web
	@mkdir -p dist
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(DIST_LDFLAGS)' -o dist/sluice-gateway ./dataplane/cmd/sluice-gateway
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(DIST_LDFLAGS)' -o dist/sluice-admin ./controlplane/cmd/sluice-admin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(DIST_LDFLAGS)' -o dist/sluicectl ./controlplane/cmd/sluicectl
	cd dist && sha256sum sluice-gateway sluice-admin sluicectl > SHA256SUMS
	@dist/sluice-gateway --version && dist/sluice-admin --version && dist/sluicectl version

# web builds the console into web/dist and copies it where sluice-admin
# embeds it; a Go-only build (no Node) embeds a placeholder page instead.
web:
	scripts/build-web.sh

lint: fmt vet

fmt:
	@out=$$(gofmt -l $(MODULES) $(CHECK_MODULE)); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet: vet-work
	cd $(CHECK_MODULE) && GOWORK=off $(GO) vet ./...

vet-work:
	$(GO) vet $(addprefix ./,$(addsuffix /...,$(MODULES)))

# test vets deploy/check in scripts/check-deploy.sh, beside the Go tests
# (scripts/test.sh), rather than before them: cold, its compile is minutes.
test: fmt vet-work build
	scripts/test.sh

run: build
	scripts/run.sh

bench: build
	scripts/bench.sh

bench-proxy: build
	scripts/bench-proxy.sh

# bench-sdk: CPU per request of a trivial handler alone and behind
# sluicehttp.Middleware under wrk (issue 31: <= 1.3x); server and wrk on
# separate cores.
bench-sdk:
	scripts/bench-sdk.sh

# bench-proxy-dedicated: nginx and the gateway on dedicated cores (P=1 by
# default: the proxy on core 0, load and upstreams on the others), CPU per
# request for HTTP/1.1 (local, batched and exact cluster limits, a JWT-keyed
# tiered limit against the local one), TLS, h2,
# h2c, gRPC, and a 20-limit gateway with and without a live preview;
# bench-scaling: the HTTP/1.1 case at P = 2, 4, 8 cores.
bench-proxy-dedicated: build
	scripts/bench-dedicated.sh

bench-scaling: build
	scripts/bench-scaling.sh

# bench-insn: user-space instructions per proxied request (callgrind) of
# nginx, a bare fasthttp proxy and sluice-gateway: steady on a busy machine.
bench-insn: build
	scripts/bench-insn.sh

# pgo-profile: records dataplane/cmd/sluice-gateway/default.pgo, the CPU
# profile the gateway is built with (profile-guided optimization), from the
# gateway under make bench-proxy's traffic; make build afterwards.
pgo-profile: build
	scripts/pgo-profile.sh

# bench-web: the console's initial JS size and, at 10,000 rules, draft open,
# YAML view and version diff times (Playwright, Debian's Chromium).
bench-web: build
	cd web && node e2e/bench.mjs

clean:
	rm -rf $(BIN) dist web/dist
	find controlplane/http/console -mindepth 1 ! -name placeholder.html -exec rm -rf {} +
