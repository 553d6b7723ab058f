#!/usr/bin/env bash
# make bench-scaling: the HTTP/1.1 comparison of bench-dedicated.sh (a
# route with a per-IP limit that never rejects; nginx limit_req as the peer)
# with the proxy on P = 2, 4 and 8 dedicated cores: nginx with P workers and
# the gateway with GOMAXPROCS=P (and --event-loops P) on cores 0..P-1, wrk,
# the upstream and Redis on the cores above. Target: gateway rps >= 0.95x
# nginx at each P; CPU per request is reported beside it.
#
# A P needs P+1 cores at least (P for the proxy, one for load); a machine
# with fewer says which P it cannot pin and skips them. Fewer load cores
# than P is run, with a note that the client side may be what saturates.
#
# Environment: PS (default "2 4 8"), ROUNDS (default 5), DURATION (default
# 8s), CONNS (default 64 per proxy core), THREADS (default: the load cores,
# at most 8); TOOLS and the rest as in scripts/bench-tools.sh (carried
# nginx, wrk, h2load and redis-server with their libraries, for a many-core
# machine without a package registry).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

PS=${PS:-2 4 8}
NCPU=$(nproc)
ran=0
for p in $PS; do
	if ((NCPU < p + 1)); then
		say "P=$p: cannot pin: $p proxy cores and at least one load core need $((p + 1)) cores, this machine has $NCPU; skipped"
		continue
	fi
	nload=$((NCPU - p))
	say "P=$p: proxy on cores 0-$((p - 1)), load on $p-$((NCPU - 1))"
	P=$p CASES=local ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-8s} CONNS=${CONNS:-$((64 * p))} \
		THREADS=${THREADS:-$((nload < 8 ? nload : 8))} scripts/bench-dedicated.sh
	ran=$((ran + 1))
done
if ((ran == 0)); then
	say "nothing run: this machine has $NCPU cores; bench-scaling needs 3 or more (P=2), 9 or more for every P in '$PS'"
fi
