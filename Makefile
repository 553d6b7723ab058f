# Sluice — see README.md. Every target works on a fresh machine: tools it needs
# are checked by scripts/ and installed or named when missing.
SHELL := /bin/bash
GO ?= go
MODULES := api controlplane dataplane etcdwatch migrations
BIN := bin
export GOFLAGS ?= -buildvcs=false

.PHONY: all build test run bench bench-proxy lint fmt vet clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/sluice-gateway ./dataplane/cmd/sluice-gateway
	$(GO) build -o $(BIN)/demo-upstream ./dataplane/cmd/demo-upstream
	$(GO) build -o $(BIN)/sluice-admin ./controlplane/cmd/sluice-admin

lint: fmt vet

fmt:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(addprefix ./,$(addsuffix /...,$(MODULES)))

test: lint build
	scripts/test.sh

run: build
	scripts/run.sh

bench: build
	scripts/bench.sh

bench-proxy: build
	scripts/bench-proxy.sh

clean:
	rm -rf $(BIN)
