#!/usr/bin/env bash
# The console's checks: npm ci (when node_modules is missing or stale), the
# API types generated from api/openapi.yaml and type-checked, ESLint, the
# Vitest unit tests, the live chart's hover (e2e/charthover.mjs: the chart
# alone in Chromium), and the end-to-end run (Playwright driving Debian's
# Chromium against a real sluice-admin, Postgres, embedded etcd and
# sluice-gateway). Expects `make build` to have built bin/ with the console
# embedded (make test does).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_postgres
ensure_web_deps
ensure_chromium
for b in sluice-admin sluice-gateway demo-upstream orders-example; do
	[ -x "bin/$b" ] || die "bin/$b is missing: run make build first"
done
cd web
say "console: type check (types generated from api/openapi.yaml)"
npm run --silent typecheck
say "console: lint"
npm run --silent lint
say "console: unit tests"
npx vitest run --reporter=dot
say "console: the live chart's hover (Chromium, no stack)"
CHROMIUM=$CHROMIUM timeout 120 node e2e/charthover.mjs
say "console: end-to-end (Chromium at $CHROMIUM)"
CHROMIUM=$CHROMIUM timeout 300 node e2e/console.e2e.mjs
