#!/usr/bin/env bash
# make bench-insn: user-space instructions per proxied request, counted by
# valgrind's callgrind, for nginx (proxy_pass, upstream keepalive,
# limit_req), a bare fasthttp proxy (dataplane/internal/cmd/bareproxy
# --engine fasthttp: fasthttp's own server and client) and sluice-gateway
# (the same per-IP token bucket as make bench-proxy, on its one HTTP/1.1
# engine, the event loops). Each proxy runs alone under callgrind; after WARM requests the
# counters are zeroed, REQUESTS keep-alive requests are sent (h2load --h1,
# 8 connections, to one nginx upstream) and the count is read. Counted
# instructions do not depend on what else the machine runs, so this is the
# steady figure next to make bench-proxy's CPU time (which also holds the
# kernel's share: loopback TCP, about 80% of nginx's time). It counts user
# space only.
#
# Environment: REQUESTS (default 3000), WARM (default 1000).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_pkg valgrind valgrind
ensure_pkg callgrind_control valgrind
ensure_pkg nginx nginx-light
ensure_pkg h2load nghttp2-client

REQUESTS=${REQUESTS:-3000}
WARM=${WARM:-1000}
UP=18081 PX=18082 ADMIN=18083
[ -x bin/sluice-gateway ] || die "bin/sluice-gateway is missing: run make build"

bench_workdir sluice-insn

go build -o "$work/bareproxy" ./dataplane/internal/cmd/bareproxy
mkdir -p "$work/up" "$work/ngx"
bench_upstream_conf "$work/up" "$UP"
# One nginx process (no master, one worker) so that callgrind follows it.
bench_proxy_conf "$work/ngx" "$UP" "master_process off;
daemon off;
worker_processes 1;" "    listen 127.0.0.1:$PX;"
bench_rules "$work/rules.yaml" "$UP"
nginx -p "$work/up" -c "$work/up/nginx.conf" -g 'daemon off;' & pids+=($!)

declare -A insn
# measure NAME COMMAND...: instructions per request of COMMAND, a proxy on $PX.
measure() {
	local name=$1 vg out f total
	shift
	# Go's asynchronous preemption signals confuse callgrind's signal
	# handling; cooperative preemption alone is enough for a proxy. And
	# valgrind cannot run RDTSCP, which Go's runtime uses where the CPU
	# (as valgrind reports it) has it (AMD EPYC machines): off.
	GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind --callgrind-out-file="$work/cg.$name.%p" "$@" \
		>"$work/$name.log" 2>&1 &
	vg=$!
	pids+=($vg)
	for _ in $(seq 300); do curl -fs -o /dev/null "http://127.0.0.1:$PX/" 2>/dev/null && break; sleep 0.2; done
	curl -fsS -o /dev/null "http://127.0.0.1:$PX/" || die "$name does not answer on $PX under valgrind; see $work/$name.log"
	h2load --h1 -n "$WARM" -c 8 "http://127.0.0.1:$PX/" >/dev/null 2>&1
	callgrind_control -z "$vg" >/dev/null 2>&1
	out=$(h2load --h1 -n "$REQUESTS" -c 8 "http://127.0.0.1:$PX/" 2>&1)
	grep -q "$REQUESTS succeeded" <<<"$out" || die "$name: not every request succeeded: $out; log: $(grep -v "^==" "$work/$name.log" | head -12)"
	callgrind_control -d "$vg" >/dev/null 2>&1
	f=""
	for _ in $(seq 50); do
		f=$(ls -t "$work"/cg."$name".*.* 2>/dev/null | head -1) && [ -n "$f" ] && grep -q '^totals:' "$f" && break
		sleep 0.2
	done
	kill "$vg" 2>/dev/null || true
	wait "$vg" 2>/dev/null || true
	total=$(awk '/^totals:/{print $2; exit}' "$f")
	insn[$name]=$((total / REQUESTS))
	# Heap allocations: the calls of Go's allocator (runtime.mallocgc), in
	# callgrind's call records (cfn= names the callee, calls= follows).
	allocs=$(awk '
		/^fn=/ { next }
		/^cfn=/ {
			id = $1; sub(/^cfn=/, "", id); name = $0; sub(/^cfn=\([0-9]+\) ?/, "", name)
			if (name != "") names[id] = name
			callee = names[id]
			if (callee == "" && match($0, /\([0-9]+\)/)) callee = names[substr($0, RSTART, RLENGTH)]
			next
		}
		/^calls=/ { if (callee == "runtime.mallocgc") { split($1, c, "="); n += c[2] } callee = ""; next }
		END { print n + 0 }' "$f")
	printf '%-10s %9d instructions per request' "$name" "${insn[$name]}"
	if [ "$allocs" -gt 0 ] || [ "$name" != nginx ]; then printf ', %d heap allocations in %d requests' "$allocs" "$REQUESTS"; fi
	echo
}

say "callgrind: $REQUESTS keep-alive requests after $WARM warm-up (h2load --h1 -c 8), each proxy alone"
measure nginx nginx -p "$work/ngx" -c "$work/ngx/nginx.conf"
measure bare-fast "$work/bareproxy" --engine fasthttp --listen "127.0.0.1:$PX" --upstream "http://127.0.0.1:$UP"
measure sluice bin/sluice-gateway --rules "$work/rules.yaml" --listen "127.0.0.1:$PX" \
	--admin "127.0.0.1:$ADMIN" --log-level warn
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ printf "%.2fx", a/b }'; }
echo
echo "sluice/nginx instructions per request:     $(ratio "${insn[sluice]}" "${insn[nginx]}")"
echo "bare-fast/nginx instructions per request:  $(ratio "${insn[bare-fast]}" "${insn[nginx]}")"
echo "sluice/bare-fast instructions per request: $(ratio "${insn[sluice]}" "${insn[bare-fast]}")"
