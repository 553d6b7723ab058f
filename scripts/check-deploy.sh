#!/usr/bin/env bash
# Checks the deployment files under deploy/ against what consumes them, with
# the Go tests of deploy/check (a module of its own, outside go.work, so that
# k8s.io/api, Helm, Prometheus and compose-go never enter the dataplane's or
# the control plane's build list; hence GOWORK=off):
#
#   - the Helm chart deploy/helm/sluice: helm lint --strict and helm template
#     with the default values, ci/full-values.yaml (every option on) and
#     ci/daemonset-values.yaml, by Helm's own packages (helm.sh/helm/v4,
#     pinned in deploy/check/go.mod; no helm binary is needed);
#   - every rendered object and every manifest in deploy/kubernetes decoded
#     strictly into its k8s.io/api type (unknown fields fail), then checked
#     for consistency (selectors, ports, probes, non-root, read-only root);
#   - the container args and SLUICE_ variables of the chart, the manifests
#     and deploy/compose.yaml against the flags of the built binaries in
#     bin/ (make build), read from their -h;
#   - deploy/compose.yaml loaded by compose-go (docker compose's loader and
#     its compose-spec JSON schema);
#   - every PromQL expression of deploy/grafana/sluice.json and
#     deploy/prometheus/alerts.yml parsed by Prometheus's parser, naming only
#     metrics the binaries' source defines.
#
# go vet runs here too (make test's lint leaves this module to this script, so
# that its cold compile can run beside the Go tests: scripts/test.sh).
# Missing binaries are a failure here (SLUICE_DEPLOY_CHECK_STRICT); run
# make build first (make test does).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
for b in sluice-gateway sluice-admin demo-upstream; do
	[ -x "bin/$b" ] || die "bin/$b is missing: run make build first"
done
say "deploy/check: Helm chart, Kubernetes manifests, compose file, dashboard and alerts"
cd deploy/check
GOWORK=off go vet ./...
GOWORK=off SLUICE_DEPLOY_CHECK_STRICT=1 SLUICE_BIN="$PWD/../../bin" go test -count=1 ./...
