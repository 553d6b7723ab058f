#!/usr/bin/env bash
# Runs every module's tests. Services the tests need (Postgres, Redis) are
# checked first and started when they are installed but down.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_redis
ensure_postgres
ensure_pkg redis-cli redis-tools
# deploy/check (vet and tests) runs beside the Go tests, niced: cold, it
# compiles Helm, k8s.io/api and Prometheus (about 3 CPU-minutes), which fits
# in the CPU the Go tests leave idle while they wait on their servers; warm,
# it takes seconds. Its output is printed once it is done.
deploy_log=$(mktemp)
trap 'rm -f "$deploy_log"' EXIT
nice -n 10 scripts/check-deploy.sh >"$deploy_log" 2>&1 &
deploy_pid=$!
go_rc=0
go test -count=1 -race -timeout 10m ./api/... ./etcdwatch/... ./dataplane/... ./migrations/... ./controlplane/... || go_rc=$?
deploy_rc=0
wait "$deploy_pid" || deploy_rc=$?
cat "$deploy_log"
[ "$go_rc" -eq 0 ] || die "Go tests failed (exit $go_rc)"
[ "$deploy_rc" -eq 0 ] || die "deploy/check failed (exit $deploy_rc)"
scripts/test-web.sh
