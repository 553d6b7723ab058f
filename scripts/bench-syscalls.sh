#!/usr/bin/env bash
# bench-syscalls.sh: system calls and context switches per proxied request
# of nginx and of sluice-gateway (its one HTTP/1.1 engine, the event
# loops), each under wrk -t1 -c32 against one nginx upstream with make bench-proxy's rules,
# counted with perf's syscall tracepoints over the proxy's processes.
# Counts, unlike times, hold still on a shared machine; on one where a
# system call is expensive (a guest with page-table isolation) they are most
# of a proxy's cost. Needs perf (Debian: linux-perf) and root, or
# kernel.perf_event_paranoid low enough for tracepoints.
#
# Environment: DURATION (seconds of counting per proxy, default 5),
# BASEPORT (default 18580; uses BASEPORT..BASEPORT+3).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_pkg wrk wrk
ensure_pkg nginx nginx-light
ensure_pkg perf linux-perf
[ -x bin/sluice-gateway ] || die "bin/sluice-gateway is missing: run make build"
perf list tracepoint 2>/dev/null | grep 'raw_syscalls:sys_enter' >/dev/null || die "perf has no syscall tracepoints here (run as root, or lower kernel.perf_event_paranoid)"

SECS=${DURATION:-5}
SECS=${SECS%s}
P=${BASEPORT:-18580}
UP=$P NGX=$((P + 1)) GW=$((P + 2))
bench_workdir sluice-syscalls
mkdir -p "$work/up" "$work/ngx"
bench_upstream_conf "$work/up" "$UP"
bench_proxy_conf "$work/ngx" "$UP" "worker_processes auto;" "    listen 127.0.0.1:$NGX;"
bench_rules "$work/rules.yaml" "$UP"
nginx -p "$work/up" -c "$work/up/nginx.conf" -g 'daemon off;' & pids+=($!)
nginx -p "$work/ngx" -c "$work/ngx/nginx.conf" -g 'daemon off;' & ngxpid=$!; pids+=($ngxpid)
bin/sluice-gateway --rules "$work/rules.yaml" --listen "127.0.0.1:$GW" --admin "127.0.0.1:$((GW + 1))" \
	--log-level warn 2>"$work/gw.log" & gwpid=$!; pids+=($gwpid)
for port in $UP $NGX $GW; do
	for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.1; done
	curl -fsS -o /dev/null "http://127.0.0.1:$port/" || die "nothing answers on port $port; see $work"
done
allpids() { echo "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null) | tr ' ' ','; }
events=syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,syscalls:sys_enter_write,syscalls:sys_enter_writev
events+=,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_futex
events+=,syscalls:sys_enter_nanosleep,raw_syscalls:sys_enter,context-switches
say "wrk -t1 -c32, ${SECS}s counted per proxy (after 2s of warm-up)"
printf '%-16s %8s' proxy "req/s"
for e in read recvfrom write writev epoll_wait epoll_pwait futex nanosleep all ctxsw; do printf ' %9s' "$e"; done
echo
for t in "nginx $ngxpid $NGX" "sluice-evloop $gwpid $GW"; do
	set -- $t
	wrk -t1 -c32 -d2s "http://127.0.0.1:$3/bench" >/dev/null
	# wrk runs a second longer than perf counts, so that the count covers load only.
	perf stat -x, -e "$events" -p "$(allpids "$2")" -o "$work/perf.$1" -- sleep "$SECS" &
	sp=$!
	out=$(wrk -t1 -c32 -d"$((SECS + 1))s" "http://127.0.0.1:$3/bench")
	wait $sp
	r=$(awk '/^Requests\/sec:/{print $2}' <<<"$out")
	printf '%-16s %8.0f' "$1" "$r"
	# Requests during the counted seconds: the rate times their length.
	awk -F, -v n="$(awk -v r="$r" -v s="$SECS" 'BEGIN{print r*s}')" '
		NF > 2 && $1 ~ /^[0-9]/ { v[$3] = $1 }
		END {
			split("syscalls:sys_enter_read syscalls:sys_enter_recvfrom syscalls:sys_enter_write syscalls:sys_enter_writev syscalls:sys_enter_epoll_wait syscalls:sys_enter_epoll_pwait syscalls:sys_enter_futex syscalls:sys_enter_nanosleep raw_syscalls:sys_enter context-switches", k, " ")
			for (i = 1; i <= 10; i++) printf " %9.3f", v[k[i]] / n
			printf "\n"
		}' "$work/perf.$1"
done
echo "(per request)"
