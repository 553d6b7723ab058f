#!/usr/bin/env bash
# make bench-proxy: the same load against (a) the upstream directly, (b)
# Debian's nginx with proxy_pass, upstream keepalive and limit_req, (c)
# sluice-gateway with the equivalent limit, (d) Caddy's reverse_proxy with
# keep-alive, (e) a bare httputil.ReverseProxy and (f) a bare fasthttp
# server + HostClient (dataplane/internal/cmd/bareproxy: fasthttp's own
# server and client, which the gateway's event loops were measured against),
# for transparency; then over TLS (wrk over https, keep-alive):
# nginx `ssl` vs sluice --listen-tls with the same certificate; then HTTP/2
# with h2load: h2c and TLS h2, nginx `http2` vs sluice. Same upstream (an nginx
# answering a fixed 13-byte body), same client settings, rounds interleaved
# target by target so drift on a shared machine hits all alike.
#
# Besides req/s and latency it reports each proxy's CPU time per request:
# utime+stime of the proxy's processes (nginx: master and workers) from
# /proc/<pid>/stat over the round, divided by the requests the client made.
# That is steadier than req/s on a shared machine. Prints each run, then
# medians and ratios: the ratio of the medians, and the median of each
# round's ratio.
#
# Environment: ROUNDS (default 5), DURATION (default 8s), CONNS (default 32),
# THREADS (default 1), H2STREAMS (h2load streams per connection, default 10),
# PROXY_CPUS (default: nginx's worker_processes auto and Go's default
# GOMAXPROCS; a number N gives every proxy N workers/threads), CADDY_VERSION
# (default v2.11.9; built once with go install into ~/.cache/sluice-bench),
# SKIP_TLS=1 and SKIP_H2=1 leave those parts out. The gateway has one
# HTTP/1.1 engine, its event loops (SLUICE_EVENT_LOOPS=N sets their number,
# as --event-loops does).
#
# MODE=dedicated runs scripts/bench-dedicated.sh instead (also make
# bench-proxy-dedicated): the proxies on dedicated cores, CPU per request
# per case (HTTP/1.1 local and cluster limits, TLS, h2, h2c, gRPC).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${MODE:-shared}" = dedicated ]; then exec scripts/bench-dedicated.sh; fi
[ "${MODE:-shared}" = shared ] || { echo "error: MODE=$MODE: shared (the default) or dedicated" >&2; exit 1; }
source scripts/lib.sh
ensure_pkg wrk wrk
ensure_pkg nginx nginx-light
ensure_pkg h2load nghttp2-client
ensure_pkg openssl openssl

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-8s}
CONNS=${CONNS:-32}
THREADS=${THREADS:-1}
H2STREAMS=${H2STREAMS:-10}
SKIP_TLS=${SKIP_TLS:-0}
SKIP_H2=${SKIP_H2:-0}
CADDY_VERSION=${CADDY_VERSION:-v2.11.9}
UP=18091 NGX=18092 GW=18093 GWADMIN=18094 BARE=18095 CADDY=18096 BAREFAST=18090
NGXTLS=18097 GWTLS=18098 NGXH2C=18099
PROXY_CPUS=${PROXY_CPUS:-auto}
if [ "$PROXY_CPUS" != auto ]; then export GOMAXPROCS=$PROXY_CPUS; fi
TICK=$(getconf CLK_TCK)
SECS=${DURATION%s}

# Caddy, built from the Go module proxy at a pinned version, cached.
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/sluice-bench
CADDY_BIN=$CACHE/caddy-$CADDY_VERSION/caddy
if [ ! -x "$CADDY_BIN" ]; then
	say "building Caddy $CADDY_VERSION into $(dirname "$CADDY_BIN") (once)"
	mkdir -p "$(dirname "$CADDY_BIN")"
	GOWORK=off GOBIN=$(dirname "$CADDY_BIN") go install "github.com/caddyserver/caddy/v2/cmd/caddy@$CADDY_VERSION" ||
		die "could not build Caddy $CADDY_VERSION"
fi

bench_workdir sluice-bench

# The bare proxy is built here, not by make build.
go build -o "$work/bareproxy" ./dataplane/internal/cmd/bareproxy

# One self-signed certificate for every TLS listener.
bench_cert "$work"

mkdir -p "$work/up" "$work/ngx" "$work/caddy"
bench_upstream_conf "$work/up" "$UP"
bench_proxy_conf "$work/ngx" "$UP" "worker_processes $PROXY_CPUS;" \
	"    listen 127.0.0.1:$NGX;
    listen 127.0.0.1:$NGXTLS ssl http2;
    listen 127.0.0.1:$NGXH2C http2;" \
	"  ssl_certificate $work/tls.crt;
  ssl_certificate_key $work/tls.key;
  ssl_protocols TLSv1.2 TLSv1.3;"
cat >"$work/caddy/Caddyfile" <<EOT
{
	admin off
	auto_https off
	persist_config off
	log {
		level ERROR
	}
}
http://127.0.0.1:$CADDY {
	reverse_proxy 127.0.0.1:$UP {
		transport http {
			keepalive 90s
			keepalive_idle_conns 256
			keepalive_idle_conns_per_host 256
		}
	}
}
EOT
bench_rules "$work/rules.yaml" "$UP"

nginx -p "$work/up" -c "$work/up/nginx.conf" -g 'daemon off;' & pids+=($!)
nginx -p "$work/ngx" -c "$work/ngx/nginx.conf" -g 'daemon off;' & ngx_pid=$!; pids+=($ngx_pid)
bin/sluice-gateway --rules "$work/rules.yaml" --listen "127.0.0.1:$GW" --admin "127.0.0.1:$GWADMIN" \
	--listen-tls "127.0.0.1:$GWTLS" --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
	--log-level warn 2>"$work/gw.log" & gw_pid=$!; pids+=($gw_pid)
"$CADDY_BIN" run --config "$work/caddy/Caddyfile" --adapter caddyfile >"$work/caddy.log" 2>&1 & caddy_pid=$!; pids+=($caddy_pid)
"$work/bareproxy" --listen "127.0.0.1:$BARE" --upstream "http://127.0.0.1:$UP" 2>"$work/bare.log" & bare_pid=$!; pids+=($bare_pid)
"$work/bareproxy" --engine fasthttp --listen "127.0.0.1:$BAREFAST" --upstream "http://127.0.0.1:$UP" 2>"$work/barefast.log" & barefast_pid=$!; pids+=($barefast_pid)
for url in http://127.0.0.1:{$UP,$NGX,$GW,$CADDY,$BARE,$BAREFAST}/ https://127.0.0.1:{$NGXTLS,$GWTLS}/; do
	for _ in $(seq 100); do curl -kfsS -o /dev/null "$url" 2>/dev/null && break; sleep 0.1; done
	curl -kfsS -o /dev/null "$url" || die "nothing answers at $url; see $work"
done
up_pid=${pids[0]}

# Processes whose CPU each target's round is charged to.
declare -A procs
procs[direct]="$up_pid $(ps -o pid= --ppid "$up_pid" | tr '\n' ' ')"
ngx_all="$ngx_pid $(ps -o pid= --ppid "$ngx_pid" | tr '\n' ' ')"
for t in nginx nginx-tls nginx-h2c nginx-h2; do procs[$t]=$ngx_all; done
for t in sluice sluice-tls sluice-h2c sluice-h2; do procs[$t]=$gw_pid; done
procs[caddy]=$caddy_pid
procs[bare]=$bare_pid
procs[bare-fast]=$barefast_pid

cpu_ticks() { # pids... → utime+stime clock ticks, summed (a process's stat counts all its threads)
	local t=0 p
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat")))
	done
	echo "$t"
}

declare -A rps p50 p99 cpu
to_ms() { # wrk latency such as 412.00us, 1.20ms, 2.01s → milliseconds
	awk -v v="$1" 'BEGIN{ if (v ~ /us$/) {sub(/us$/,"",v); print v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v); print v+0} else if (v ~ /s$/) {sub(/s$/,"",v); print v*1000} else print v }'
}
record() { # name round rps p50 p99 requests ticks note
	local us
	us=$(awk -v t="$7" -v n="$6" -v hz="$TICK" 'BEGIN{ if (n > 0) printf "%.2f", t / hz * 1e6 / n; else print 0 }')
	rps[$1]+="$3 "; p50[$1]+="$4 "; p99[$1]+="$5 "; cpu[$1]+="$us "
	printf '%-11s round %d: %10.0f req/s  p50 %7.3f ms  p99 %7.3f ms  cpu %7.2f us/req %s\n' "$1" "$2" "$3" "$4" "$5" "$us" "$8"
}
run_wrk() { # name url round
	local out before after r l50 l99 n errs
	# shellcheck disable=SC2086 # the pid list splits on purpose
	before=$(cpu_ticks ${procs[$1]})
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "$2" 2>&1)
	# shellcheck disable=SC2086
	after=$(cpu_ticks ${procs[$1]})
	r=$(awk '/^Requests\/sec:/{print $2}' <<<"$out")
	l50=$(to_ms "$(awk '$1=="50%"{print $2}' <<<"$out")")
	l99=$(to_ms "$(awk '$1=="99%"{print $2}' <<<"$out")")
	n=$(awk '/requests in/{print $1}' <<<"$out")
	errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
	record "$1" "$3" "$r" "$l50" "$l99" "$n" "$((after - before))" "$errs"
}
run_h2load() { # name url round; h2load reports a mean, not percentiles: p50 and p99 hold the mean
	local out before after r mean n proto failed
	# shellcheck disable=SC2086
	before=$(cpu_ticks ${procs[$1]})
	out=$(h2load -c"$CONNS" -m"$H2STREAMS" -t"$THREADS" -D"$SECS" "$2" 2>&1)
	# shellcheck disable=SC2086
	after=$(cpu_ticks ${procs[$1]})
	proto=$(awk '/^Application protocol:/{print $3}' <<<"$out")
	case "$proto" in h2 | h2c) ;; *) die "$1: h2load negotiated '${proto:-nothing}', not HTTP/2: $out" ;; esac
	r=$(awk '/^finished in/{gsub(",",""); print $4}' <<<"$out")
	n=$(awk '/^requests:/{print $8}' <<<"$out") # succeeded
	failed=$(awk '/^requests:/{print $10}' <<<"$out")
	mean=$(to_ms "$(awk '/^time for request:/{print $6}' <<<"$out")")
	record "$1" "$3" "$r" "$mean" "$mean" "$n" "$((after - before))" "$([ "${failed:-0}" != 0 ] && echo "failed: $failed")"
}
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }

h1=(direct "http://127.0.0.1:$UP/bench" nginx "http://127.0.0.1:$NGX/bench" sluice "http://127.0.0.1:$GW/bench"
	caddy "http://127.0.0.1:$CADDY/bench" bare "http://127.0.0.1:$BARE/bench" bare-fast "http://127.0.0.1:$BAREFAST/bench")
tls=()
[ "$SKIP_TLS" = 1 ] || tls=(nginx-tls "https://127.0.0.1:$NGXTLS/bench" sluice-tls "https://127.0.0.1:$GWTLS/bench")
h2=()
[ "$SKIP_H2" = 1 ] || h2=(nginx-h2c "http://127.0.0.1:$NGXH2C/bench" sluice-h2c "http://127.0.0.1:$GW/bench"
	nginx-h2 "https://127.0.0.1:$NGXTLS/bench" sluice-h2 "https://127.0.0.1:$GWTLS/bench")

say "warming up"
for ((j = 1; j < ${#h1[@]}; j += 2)); do wrk -t1 -c"$CONNS" -d2s "${h1[j]}" >/dev/null; done
for ((j = 1; j < ${#tls[@]}; j += 2)); do wrk -t1 -c"$CONNS" -d2s "${tls[j]}" >/dev/null; done
for ((j = 1; j < ${#h2[@]}; j += 2)); do h2load -c"$CONNS" -m"$H2STREAMS" -D2 "${h2[j]}" >/dev/null; done
say "wrk -t$THREADS -c$CONNS -d$DURATION; h2load -c$CONNS -m$H2STREAMS -D$SECS; $ROUNDS rounds; proxies get $PROXY_CPUS CPU(s) (nginx worker_processes, Go GOMAXPROCS)"
for i in $(seq "$ROUNDS"); do
	for ((j = 0; j < ${#h1[@]}; j += 2)); do run_wrk "${h1[j]}" "${h1[j + 1]}" "$i"; done
	for ((j = 0; j < ${#tls[@]}; j += 2)); do run_wrk "${tls[j]}" "${tls[j + 1]}" "$i"; done
	for ((j = 0; j < ${#h2[@]}; j += 2)); do run_h2load "${h2[j]}" "${h2[j + 1]}" "$i"; done
done

targets=()
for ((j = 0; j < ${#h1[@]}; j += 2)); do targets+=("${h1[j]}"); done
for ((j = 0; j < ${#tls[@]}; j += 2)); do targets+=("${tls[j]}"); done
for ((j = 0; j < ${#h2[@]}; j += 2)); do targets+=("${h2[j]}"); done
echo
echo "medians of $ROUNDS rounds (h2load rows: p50 and p99 columns hold the mean latency; direct's cpu is the upstream nginx's)"
printf '%-11s %12s %10s %10s %12s\n' target "req/s" "p50 ms" "p99 ms" "cpu us/req"
declare -A M P99 C
for t in "${targets[@]}"; do
	M[$t]=$(median "${rps[$t]}"); P99[$t]=$(median "${p99[$t]}"); C[$t]=$(median "${cpu[$t]}")
	printf '%-11s %12.0f %10.3f %10.3f %12.2f\n' "$t" "${M[$t]}" "$(median "${p50[$t]}")" "${P99[$t]}" "${C[$t]}"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2fx", a/b; else print "n/a" }'; }
# rratio A B: the median over rounds of A's figure ÷ B's in the same round
# (the rounds interleave the targets, so a round's two figures were taken
# minutes apart at most: on a noisy machine this moves less than the ratio
# of the medians).
rratio() {
	paste <(tr ' ' '\n' <<<"$1" | grep -v '^$') <(tr ' ' '\n' <<<"$2" | grep -v '^$') |
		awk '$2 > 0 {print $1/$2}' | sort -g | awk '{a[NR]=$1} END{ if (NR == 0) print "n/a"; else if (NR%2) printf "%.2fx", a[(NR+1)/2]; else printf "%.2fx", (a[NR/2]+a[NR/2+1])/2 }'
}
echo
echo "sluice/nginx rps:            $(ratio "${M[sluice]}" "${M[nginx]}")  (target >= 0.9x, issue 27); per round: $(rratio "${rps[sluice]}" "${rps[nginx]}")"
echo "sluice/caddy rps:            $(ratio "${M[sluice]}" "${M[caddy]}")  (target >= 3x); per round: $(rratio "${rps[sluice]}" "${rps[caddy]}"); nginx/caddy: $(ratio "${M[nginx]}" "${M[caddy]}")"
echo "sluice/bare ReverseProxy rps: $(ratio "${M[sluice]}" "${M[bare]}"); sluice/bare fasthttp rps: $(ratio "${M[sluice]}" "${M[bare-fast]}")"
echo "cpu per request sluice/nginx: $(ratio "${C[sluice]}" "${C[nginx]}")  (target <= 1.3x); per round: $(rratio "${cpu[sluice]}" "${cpu[nginx]}")"
echo "cpu per request caddy/nginx:  $(ratio "${C[caddy]}" "${C[nginx]}"); bare/nginx: $(ratio "${C[bare]}" "${C[nginx]}"); bare-fast/nginx: $(ratio "${C[bare-fast]}" "${C[nginx]}")"
awk -v sp="${P99[sluice]}" -v np="${P99[nginx]}" -v dp="${P99[direct]}" 'BEGIN{
	an = np-dp; as = sp-dp
	printf "added p99 (vs direct): nginx %.3f ms, sluice %.3f ms", an, as
	if (an > 0 && as >= 0) printf " -> %.2fx  (target <= 1.5x)\n", as/an; else printf " (one of them added none measurable: no ratio)\n"
}'
if [ ${#tls[@]} -gt 0 ]; then
	echo "TLS sluice/nginx rps:         $(ratio "${M[sluice-tls]}" "${M[nginx-tls]}")  (target >= 0.7x); cpu $(ratio "${C[sluice-tls]}" "${C[nginx-tls]}")"
fi
if [ ${#h2[@]} -gt 0 ]; then
	echo "h2c sluice/nginx rps:         $(ratio "${M[sluice-h2c]}" "${M[nginx-h2c]}"); cpu $(ratio "${C[sluice-h2c]}" "${C[nginx-h2c]}")"
	echo "TLS h2 sluice/nginx rps:      $(ratio "${M[sluice-h2]}" "${M[nginx-h2]}"); cpu $(ratio "${C[sluice-h2]}" "${C[nginx-h2]}")"
fi
