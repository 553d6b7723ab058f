#!/usr/bin/env bash
# bench-engine-ab.sh A B, or bench-engine-ab.sh NAME=COMMAND...: the request
# path of gateway binaries (or one binary in several settings) side by side,
# in interleaved rounds (A, B, ..., nginx, A, B, ..., nginx, ...), each
# proxying to the same nginx upstream with the same rules (one route, a
# non-rejecting per-IP token bucket) as scripts/bench-proxy.sh; nginx
# (proxy_pass, keepalive, limit_req) runs in the same rounds as the named
# peer. Reports medians of rps, p99 and CPU time per request of each proxy
# process (utime+stime from /proc over the round / requests, split into
# user and system time), which moves less than rps on a shared machine, and
# each one's ratios to nginx: of the medians, and the median of each
# round's ratio.
#
# A COMMAND is a gateway binary, optionally after environment settings,
# to which the listen, admin and rules flags are added, e.g.
#   scripts/bench-engine-ab.sh one="bin/sluice-gateway --event-loops 1" \
#     two="bin/sluice-gateway --event-loops 2" \
#     auto=bin/sluice-gateway
# Two bare paths (the old form) are named A and B.
#
# Environment: ROUNDS (default 5), DURATION (default 5s), CONNS (default 32),
# BASEPORT (default 18290; uses BASEPORT, BASEPORT+1 and two ports per
# command after them), NGINX_WORKERS (default auto).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_pkg wrk wrk
ensure_pkg nginx nginx-light
[ $# -ge 1 ] || die "usage: $0 GATEWAY_BINARY_A GATEWAY_BINARY_B, or $0 NAME=COMMAND..."
if [ $# -eq 2 ] && [[ $1 != *=* ]] && [[ $2 != *=* ]]; then
	set -- "A=$(realpath "$1")" "B=$(realpath "$2")"
fi
ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-5s} CONNS=${CONNS:-32}
P=${BASEPORT:-18290}
UP=$P NGX=$((P + 1))
bench_workdir sluice-ab
mkdir -p "$work/up" "$work/ngx"
bench_upstream_conf "$work/up" "$UP"
bench_proxy_conf "$work/ngx" "$UP" "worker_processes ${NGINX_WORKERS:-auto};" "    listen 127.0.0.1:$NGX;"
bench_rules "$work/rules.yaml" "$UP"
nginx -p "$work/up" -c "$work/up/nginx.conf" -g 'daemon off;' & pids+=($!)
nginx -p "$work/ngx" -c "$work/ngx/nginx.conf" -g 'daemon off;' & ngxpid=$!; pids+=($ngxpid)
names=() port=$((P + 2))
declare -A pidof portof
for arg in "$@"; do
	name=${arg%%=*} cmd=${arg#*=}
	[ -n "$name" ] && [ "$name" != "$arg" ] || die "expected NAME=COMMAND, got $arg"
	# shellcheck disable=SC2086 # the command splits into settings, binary and flags on purpose
	env $cmd --rules "$work/rules.yaml" --listen "127.0.0.1:$port" --admin "127.0.0.1:$((port + 1))" \
		--log-level warn 2>"$work/$name.log" &
	pidof[$name]=$! portof[$name]=$port
	pids+=($!)
	names+=("$name")
	port=$((port + 2))
done
pidof[nginx]=$ngxpid portof[nginx]=$NGX
for name in "${names[@]}" nginx; do
	port=${portof[$name]}
	for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.1; done
	curl -fsS -o /dev/null "http://127.0.0.1:$port/" || die "$name does not answer on port $port; see $work"
done
# ticks PID: "utime stime" of the process and its children (nginx's workers), in clock ticks.
ticks() {
	local u=0 s=0 p a b
	for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		read -r a b < <(awk '{ sub(/^.*\) /, ""); print $12, $13 }' /proc/"$p"/stat)
		u=$((u + a)) s=$((s + b))
	done
	echo "$u $s"
}
HZ=$(getconf CLK_TCK)
to_ms() { awk -v v="$1" 'BEGIN{ if (v ~ /us$/) {sub(/us$/,"",v); print v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v); print v+0} else if (v ~ /s$/) {sub(/s$/,"",v); print v*1000} else print v }'; }
declare -A rps p99 usr sys cpu
run_one() { # name round
	local u0 s0 u1 s1 out r n l99 us sy
	read -r u0 s0 < <(ticks "${pidof[$1]}")
	out=$(wrk -t1 -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:${portof[$1]}/bench" 2>&1)
	read -r u1 s1 < <(ticks "${pidof[$1]}")
	r=$(awk '/^Requests\/sec:/{print $2}' <<<"$out")
	n=$(awk '/requests in/{print $1}' <<<"$out")
	l99=$(to_ms "$(awk '$1=="99%"{print $2}' <<<"$out")")
	us=$(awk -v d=$((u1 - u0)) -v hz="$HZ" -v n="$n" 'BEGIN{printf "%.2f", d/hz*1e6/n}')
	sy=$(awk -v d=$((s1 - s0)) -v hz="$HZ" -v n="$n" 'BEGIN{printf "%.2f", d/hz*1e6/n}')
	rps[$1]+="$r " p99[$1]+="$l99 " usr[$1]+="$us " sys[$1]+="$sy " cpu[$1]+="$(awk -v a="$us" -v b="$sy" 'BEGIN{print a+b}') "
	printf '%-8s round %d: %9.0f req/s  p99 %8.3f ms  cpu %6.2f us/req (user %5.2f, sys %5.2f) %s\n' "$1" "$2" "$r" "$l99" \
		"$(awk -v a="$us" -v b="$sy" 'BEGIN{print a+b}')" "$us" "$sy" "$(awk '/Non-2xx|Socket errors/' <<<"$out")"
}
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }
# rmedian A B: the median over rounds of A's figure ÷ B's in the same round.
rmedian() {
	paste <(tr ' ' '\n' <<<"$1" | grep -v '^$') <(tr ' ' '\n' <<<"$2" | grep -v '^$') |
		awk '$2 > 0 {print $1/$2}' | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'
}
say "warming up"
for name in "${names[@]}" nginx; do wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:${portof[$name]}/bench" >/dev/null; done
say "$*; wrk -t1 -c$CONNS -d$DURATION, $ROUNDS interleaved rounds"
for i in $(seq "$ROUNDS"); do
	for name in "${names[@]}" nginx; do run_one "$name" "$i"; done
done
echo
printf '%-8s %9s %8s %9s %9s %9s %13s %13s\n' proxy "req/s" "p99 ms" "user us" "sys us" "cpu us" "rps/nginx" "cpu/nginx"
for name in "${names[@]}" nginx; do
	printf '%-8s %9.0f %8.3f %9.2f %9.2f %9.2f %6.2fx %5.2fx %6.2fx %5.2fx\n' "$name" "$(median "${rps[$name]}")" \
		"$(median "${p99[$name]}")" "$(median "${usr[$name]}")" "$(median "${sys[$name]}")" "$(median "${cpu[$name]}")" \
		"$(awk -v a="$(median "${rps[$name]}")" -v b="$(median "${rps[nginx]}")" 'BEGIN{print a/b}')" \
		"$(rmedian "${rps[$name]}" "${rps[nginx]}")" \
		"$(awk -v a="$(median "${cpu[$name]}")" -v b="$(median "${cpu[nginx]}")" 'BEGIN{print a/b}')" \
		"$(rmedian "${cpu[$name]}" "${cpu[nginx]}")"
done
echo "(each ratio twice: of the medians, then the median of the rounds' ratios)"
