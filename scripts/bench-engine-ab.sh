#!/usr/bin/env bash
# bench-engine-ab.sh A B: the request path of two sluice-gateway binaries
# side by side, in interleaved rounds (A, B, nginx, A, B, nginx, ...), each
# proxying to the same nginx upstream with the same rules (one route, a
# non-rejecting per-IP token bucket) as scripts/bench-proxy.sh; nginx
# (proxy_pass, keepalive, limit_req) runs in the same rounds as the named
# peer. Reports medians of rps, p99 and CPU time per request of each proxy
# process (utime+stime from /proc over the round / requests), which moves
# less than rps on a shared machine.
#
# Environment: ROUNDS (default 5), DURATION (default 5s), CONNS (default 32),
# BASEPORT (default 18290; uses BASEPORT..BASEPORT+6).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_pkg wrk wrk
ensure_pkg nginx nginx-light
[ $# -eq 2 ] || die "usage: $0 GATEWAY_BINARY_A GATEWAY_BINARY_B"
A=$(realpath "$1") B=$(realpath "$2")
ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-5s} CONNS=${CONNS:-32}
P=${BASEPORT:-18290}
UP=$P NGX=$((P+1)) GA=$((P+2)) GAA=$((P+3)) GB=$((P+4)) GBA=$((P+5))
bench_workdir sluice-ab
mkdir -p "$work/up" "$work/ngx"
bench_upstream_conf "$work/up" "$UP"
bench_proxy_conf "$work/ngx" "$UP" "worker_processes auto;" "    listen 127.0.0.1:$NGX;"
bench_rules "$work/rules.yaml" "$UP"
nginx -p "$work/up" -c "$work/up/nginx.conf" -g 'daemon off;' & pids+=($!)
nginx -p "$work/ngx" -c "$work/ngx/nginx.conf" -g 'daemon off;' & ngxpid=$!; pids+=($ngxpid)
"$A" --rules "$work/rules.yaml" --listen "127.0.0.1:$GA" --admin "127.0.0.1:$GAA" --log-level warn 2>"$work/a.log" & apid=$!; pids+=($apid)
"$B" --rules "$work/rules.yaml" --listen "127.0.0.1:$GB" --admin "127.0.0.1:$GBA" --log-level warn 2>"$work/b.log" & bpid=$!; pids+=($bpid)
for port in $UP $NGX $GA $GB; do
	for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.1; done
	curl -fsS -o /dev/null "http://127.0.0.1:$port/" || die "nothing answers on port $port; see $work"
done
# cpu_ticks PID...: utime+stime of the processes (and nginx's workers) in clock ticks.
cpu_ticks() {
	local t=0 p
	for p in "$@"; do
		t=$((t + $(awk '{print $14+$15}' /proc/"$p"/stat)))
		for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do
			t=$((t + $(awk '{print $14+$15}' /proc/"$c"/stat)))
		done
	done
	echo "$t"
}
HZ=$(getconf CLK_TCK)
to_ms() { awk -v v="$1" 'BEGIN{ if (v ~ /us$/) {sub(/us$/,"",v); print v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v); print v+0} else if (v ~ /s$/) {sub(/s$/,"",v); print v*1000} else print v }'; }
declare -A rps p99 cpu
run_one() { # name port pid round
	local c0 c1 out r n l99
	c0=$(cpu_ticks "$3")
	out=$(wrk -t1 -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$2/bench" 2>&1)
	c1=$(cpu_ticks "$3")
	r=$(awk '/^Requests\/sec:/{print $2}' <<<"$out")
	n=$(awk '/requests in/{print $1}' <<<"$out")
	l99=$(to_ms "$(awk '$1=="99%"{print $2}' <<<"$out")")
	local us; us=$(awk -v d=$((c1-c0)) -v hz="$HZ" -v n="$n" 'BEGIN{printf "%.1f", d/hz*1e6/n}')
	rps[$1]+="$r "; p99[$1]+="$l99 "; cpu[$1]+="$us "
	printf '%-6s round %d: %9.0f req/s  p99 %8.3f ms  cpu %6.1f us/req %s\n' "$1" "$4" "$r" "$l99" "$us" "$(awk '/Non-2xx|Socket errors/' <<<"$out")"
}
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }
say "warming up"
for port in $GA $GB $NGX; do wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$port/bench" >/dev/null; done
say "A=$A B=$B; wrk -t1 -c$CONNS -d$DURATION, $ROUNDS interleaved rounds"
for i in $(seq "$ROUNDS"); do
	run_one A $GA $apid "$i"
	run_one B $GB $bpid "$i"
	run_one nginx $NGX $ngxpid "$i"
done
echo
printf '%-6s %10s %10s %12s\n' proxy "req/s" "p99 ms" "cpu us/req"
for t in A B nginx; do
	printf '%-6s %10.0f %10.3f %12.1f\n' "$t" "$(median "${rps[$t]}")" "$(median "${p99[$t]}")" "$(median "${cpu[$t]}")"
done
awk -v a="$(median "${rps[A]}")" -v b="$(median "${rps[B]}")" -v n="$(median "${rps[nginx]}")" \
    -v ca="$(median "${cpu[A]}")" -v cb="$(median "${cpu[B]}")" -v cn="$(median "${cpu[nginx]}")" 'BEGIN{
	printf "\nrps vs nginx: A %.2fx, B %.2fx; B/A %.2fx\n", a/n, b/n, b/a
	printf "cpu per request vs nginx: A %.2fx, B %.2fx; B/A %.2fx\n", ca/cn, cb/cn, cb/ca
}'
