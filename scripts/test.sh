#!/usr/bin/env bash
# Runs every module's tests. Services the tests need (Postgres, Redis) are
# checked first and started when they are installed but down.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_redis
ensure_postgres
ensure_pkg redis-cli redis-tools
go test -count=1 -race -timeout 10m ./api/... ./etcdwatch/... ./dataplane/... ./migrations/... ./controlplane/...
scripts/check-deploy.sh
scripts/test-web.sh
