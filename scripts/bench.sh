#!/usr/bin/env bash
# make bench: every Go benchmark, -count 5, each package's figures side by side
# with the named peer it is compared against (x/time/rate, sony/gobreaker, a
# Spring-Cloud-Gateway-style Redis script). Raw output goes to .run/bench.txt.
# BENCH (default .) narrows the benchmarks; PKGS narrows the packages.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_redis
BENCH=${BENCH:-.}
COUNT=${COUNT:-5}
PKGS=${PKGS:-./dataplane/limit/ ./dataplane/limit/redis/ ./dataplane/breaker/ ./dataplane/degrade/ ./dataplane/proxy/}
mkdir -p .run
say "go test -run '^\$' -bench '$BENCH' -benchmem -count $COUNT $PKGS (serial, then -cpu 2 where the benchmark runs in parallel)"
go test -run '^$' -bench "$BENCH" -benchmem -count "$COUNT" -cpu 1,2 $PKGS | tee .run/bench.txt
say "raw results in .run/bench.txt (benchstat .run/bench.txt summarises them)"
