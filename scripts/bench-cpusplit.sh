#!/usr/bin/env bash
# bench-cpusplit.sh: user and system CPU time per request of nginx,
# sluice-gateway and the bare fasthttp proxy (dataplane/internal/cmd/bareproxy
# --engine fasthttp), each in turn under wrk -t1 -c32 against one nginx
# upstream, with make bench-proxy's rules (one route, a non-rejecting per-IP
# token bucket). utime and stime of each process (and of nginx's workers)
# are read from /proc before and after each round. This tells the kernel's
# share (loopback TCP, syscalls) from the process's own and shows what the
# number of Go processors costs on a machine shared with the load generator
# and the upstream.
#
# Environment: ROUNDS (default 3), DURATION (default 5s), GW_PROCS and
# BARE_PROCS (GOMAXPROCS of the gateway and of the bare proxy; default Go's
# own), NGINX_WORKERS (default auto), NOLIMIT (set: rules without the
# limit), BASEPORT (default 18480; uses BASEPORT..BASEPORT+4).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_pkg wrk wrk
ensure_pkg nginx nginx-light
[ -x bin/sluice-gateway ] || die "bin/sluice-gateway is missing: run make build"

ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-5s} P=${BASEPORT:-18480}
UP=$P NGX=$((P+1)) GW=$((P+2)) GWADMIN=$((P+3)) BARE=$((P+4))
bench_workdir sluice-cpusplit
go build -o "$work/bareproxy" ./dataplane/internal/cmd/bareproxy
mkdir -p "$work/up" "$work/ngx"
bench_upstream_conf "$work/up" "$UP"
bench_proxy_conf "$work/ngx" "$UP" "worker_processes ${NGINX_WORKERS:-auto};" "    listen 127.0.0.1:$NGX;"
bench_rules "$work/rules.yaml" "$UP"
if [ -n "${NOLIMIT:-}" ]; then sed -i '/^limits:/,$d' "$work/rules.yaml"; fi

procs() { if [ -n "$1" ]; then echo "GOMAXPROCS=$1"; else echo "GOMAXPROCS_UNSET=1"; fi; }
nginx -p "$work/up" -c "$work/up/nginx.conf" -g 'daemon off;' & pids+=($!)
nginx -p "$work/ngx" -c "$work/ngx/nginx.conf" -g 'daemon off;' & ngxpid=$!; pids+=($ngxpid)
env "$(procs "${GW_PROCS:-}")" bin/sluice-gateway --rules "$work/rules.yaml" --listen "127.0.0.1:$GW" \
	--admin "127.0.0.1:$GWADMIN" --log-level warn 2>"$work/gw.log" & gwpid=$!; pids+=($gwpid)
env "$(procs "${BARE_PROCS:-}")" "$work/bareproxy" --engine fasthttp --listen "127.0.0.1:$BARE" \
	--upstream "http://127.0.0.1:$UP" 2>"$work/bare.log" & barepid=$!; pids+=($barepid)
for port in $UP $NGX $GW $BARE; do
	for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.1; done
	curl -fsS -o /dev/null "http://127.0.0.1:$port/" || die "nothing answers on port $port; see $work"
done

# ticks PID: "utime stime" of the process and its children (nginx's workers), in clock ticks.
ticks() {
	local u=0 s=0 p a b
	for p in "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); do
		read -r a b < <(awk '{print $14, $15}' /proc/"$p"/stat)
		u=$((u + a)) s=$((s + b))
	done
	echo "$u $s"
}
HZ=$(getconf CLK_TCK)
say "warming up"
for port in $NGX $GW $BARE; do wrk -t1 -c32 -d2s "http://127.0.0.1:$port/bench" >/dev/null; done
say "wrk -t1 -c32 -d$DURATION, $ROUNDS rounds; nginx workers ${NGINX_WORKERS:-auto}, gateway GOMAXPROCS ${GW_PROCS:-default}, bare GOMAXPROCS ${BARE_PROCS:-default}${NOLIMIT:+, no limit}"
printf '%-7s %6s %9s %9s %9s %9s\n' proxy round "req/s" "user us" "sys us" "total us"
for i in $(seq "$ROUNDS"); do
	for t in "nginx $ngxpid $NGX" "sluice $gwpid $GW" "bare $barepid $BARE"; do
		set -- $t
		read -r u0 s0 < <(ticks "$2")
		out=$(wrk -t1 -c32 -d"$DURATION" "http://127.0.0.1:$3/bench")
		read -r u1 s1 < <(ticks "$2")
		n=$(awk '/requests in/{print $1}' <<<"$out")
		r=$(awk '/^Requests\/sec:/{print $2}' <<<"$out")
		awk -v name="$1" -v i="$i" -v r="$r" -v n="$n" -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v hz="$HZ" 'BEGIN{
			printf "%-7s %6d %9.0f %9.2f %9.2f %9.2f\n", name, i, r, u/hz*1e6/n, s/hz*1e6/n, (u+s)/hz*1e6/n }'
	done
done
