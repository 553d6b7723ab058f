#!/usr/bin/env bash
# Builds the console (web/) and puts it where sluice-admin embeds it
# (controlplane/http/console/, next to the committed placeholder.html):
# npm ci when node_modules is missing or stale, then npm run build (API types
# generated from api/openapi.yaml, type check, Vite build into web/dist).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_web_deps
(cd web && npm run --silent build >/dev/null)
dest=controlplane/http/console
find "$dest" -mindepth 1 ! -name placeholder.html -exec rm -rf {} +
cp -R web/dist/. "$dest/"
say "console built: web/dist (embedded from $dest)"
