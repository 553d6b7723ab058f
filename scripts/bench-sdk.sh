#!/usr/bin/env bash
# bench-sdk.sh: CPU per request of a trivial net/http handler alone and
# behind sluicehttp.Middleware (issue 31's target: at most 1.3× the handler
# alone's), under wrk. Two sdkbench servers (dataplane/sdk/internal/cmd/
# sdkbench) run side by side: "handler" alone and "guarded" behind the
# middleware following a kind: service rules file with one route and one
# non-rejecting per-IP token bucket on it. Each server is pinned to CPU
# SERVER_CPU and wrk (-t1 -c32) to CPU WRK_CPU; rounds alternate between the
# two (ROUNDS of each, interleaved). A round's CPU per request is the
# server's utime+stime from /proc/PID/stat, before and after, over the
# requests wrk completed; the script prints every round, each side's median
# and the ratio of the medians.
#
# Environment: ROUNDS (default 5), DURATION (default 5s), CONNS (default 32),
# SERVER_CPU (default 0), WRK_CPU (default 1), BASEPORT (default 18600; uses
# BASEPORT and BASEPORT+1).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_pkg wrk wrk
command -v taskset >/dev/null || die "taskset is missing (util-linux)"

ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-5s} CONNS=${CONNS:-32}
SERVER_CPU=${SERVER_CPU:-0} WRK_CPU=${WRK_CPU:-1} P=${BASEPORT:-18600}
bench_workdir sluice-bench-sdk
(cd dataplane && go build -o "$work/sdkbench" ./sdk/internal/cmd/sdkbench)
cat >"$work/rules.yaml" <<'YAML'
namespace: bench-svc
kind: service
routes:
  - id: hello
    match: {path: /hello}
limits:
  - {id: per-ip, routes: [hello], key: [ip], algorithm: token_bucket, rate: 1000000000, period: 1s}
YAML
taskset -c "$SERVER_CPU" "$work/sdkbench" --listen "127.0.0.1:$P" 2>"$work/handler.log" & plain=$!; pids+=($plain)
taskset -c "$SERVER_CPU" "$work/sdkbench" --listen "127.0.0.1:$((P+1))" --rules "$work/rules.yaml" 2>"$work/guarded.log" & guarded=$!; pids+=($guarded)
for port in $P $((P+1)); do
	for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/hello" 2>/dev/null && break; sleep 0.1; done
	curl -fsS -o /dev/null "http://127.0.0.1:$port/hello" || die "nothing answers on port $port; see $work"
done
curl -fsS -D - -o /dev/null "http://127.0.0.1:$((P+1))/hello" | grep -qi '^ratelimit-policy:' ||
	die "the guarded server's answer has no RateLimit-Policy: the middleware is not limiting"

# ticks PID: utime+stime of the process, in clock ticks.
ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }
HZ=$(getconf CLK_TCK)
say "warming up"
for port in $P $((P+1)); do taskset -c "$WRK_CPU" wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$port/hello" >/dev/null; done
say "wrk -t1 -c$CONNS -d$DURATION on CPU $WRK_CPU, servers on CPU $SERVER_CPU, $ROUNDS interleaved rounds"
printf '%-8s %6s %9s %12s\n' server round "req/s" "CPU us/req"
results=$work/results
for i in $(seq "$ROUNDS"); do
	for t in "handler $plain $P" "guarded $guarded $((P+1))"; do
		set -- $t
		c0=$(ticks "$2")
		out=$(taskset -c "$WRK_CPU" wrk -t1 -c"$CONNS" -d"$DURATION" "http://127.0.0.1:$3/hello")
		c1=$(ticks "$2")
		n=$(awk '/requests in/{print $1}' <<<"$out")
		r=$(awk '/^Requests\/sec:/{print $2}' <<<"$out")
		if grep -q 'Non-2xx' <<<"$out"; then die "$1 answered non-2xx: $(grep Non-2xx <<<"$out")"; fi
		awk -v name="$1" -v i="$i" -v r="$r" -v n="$n" -v c=$((c1 - c0)) -v hz="$HZ" 'BEGIN{
			printf "%-8s %6d %9.0f %12.2f\n", name, i, r, c/hz*1e6/n }' | tee -a "$results"
	done
done
awk '
	{ v[$1] = v[$1] " " $4 }
	function median(s,   a, n, i, j, t) {
		n = split(s, a, " ")
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
		return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
	}
	END {
		h = median(v["handler"]); g = median(v["guarded"])
		printf "median CPU per request: handler %.2f us, guarded %.2f us; ratio %.2f (target <= 1.30)\n", h, g, g / h
	}' "$results"
