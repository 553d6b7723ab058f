#!/usr/bin/env bash
# make bench-proxy-dedicated (or MODE=dedicated make bench-proxy): nginx and
# sluice-gateway on DEDICATED cores, as in production, measured by CPU time
# per request. The proxy under test runs on cores 0..P-1 (taskset): nginx
# with P workers (worker_processes P, master and workers on those cores),
# the gateway with GOMAXPROCS=P and --event-loops P; the load generators
# (wrk, h2load), the upstreams (an nginx worker answering a 13-byte body, a
# grpc-go server) and Redis run on the other cores. P defaults to 1: the
# proxy on core 0, everything else on core 1 and up.
#
# Cases (CASES, space-separated; default all), each interleaved round by
# round with its nginx peer:
#   local    HTTP/1.1, a per-IP token bucket that never rejects
#            (nginx: limit_req with the same rate)
#   batched  HTTP/1.1, the same limit with scope: cluster, mode: batched
#            (Redis on the load cores; nginx has no shared limit: its peer is
#            the local limit_req route)
#   exact    the same with mode: exact (one Redis call per request); reported
#   jwt      HTTP/1.1, a route with an identity (EdDSA, keys from a local
#            JWKS file) and a token bucket keyed on jwt:sub with pro/free
#            tiers, wrk sending one fixed valid token (-H Authorization);
#            compared with the gateway's own local (ip-keyed) run, not with
#            nginx: the target is CPU per request <= 1.15x local's. The
#            token and JWKS come from demo-upstream (--jwt-key,
#            --print-tokens; the JWKS fetched once from it into a file).
#   tls      TLS HTTP/1.1 (wrk over https; nginx `ssl`, same certificate)
#   h2       TLS h2 (h2load; nginx `ssl http2`)
#   h2c      cleartext h2 with prior knowledge (h2load; nginx `http2`)
#   grpc     gRPC unary over h2c: grpc.health.v1.Health/Check (an empty
#            request, five bytes framed) sent by h2load to nginx `grpc_pass`
#            and to the gateway's h2c route, both to the same grpc-go
#            server; before the rounds grpcbench check makes 200 calls with
#            grpc-go through each proxy and stops the run unless all return
#            OK, since h2load counts HTTP 200s and a gRPC error is a 200
#            with a grpc-status trailer.
#   preview  HTTP/1.1 through a second gateway that follows etcd (an
#            embedded etcd run by previewbench, ./dataplane/internal/cmd/
#            previewbench, on the load cores) and serves a 20-limit rule set
#            (20 token buckets keyed on ip and X-User on the benchmarked
#            route, none rejecting; wrk sends X-User), signed and published
#            as the control plane does; compared with itself: sluice-pv-off
#            runs with no preview, sluice-pv-on with a signed preview of a
#            change of 20 limits ten times tighter (still not rejecting)
#            written to /sluice/v1/ns/bench/preview before the run and
#            deleted after it. Each run first waits until the node's
#            /status says the preview runs (or does not). Target: CPU per
#            request <= 1.3x without a preview. PREVIEWBENCH_BIN, or
#            $TOOLS/bin/previewbench, or built here.
#
# CPU per request is utime+stime of the proxy's processes (nginx: master and
# workers; the gateway: its one process) from /proc/<pid>/stat over the
# run, divided by the requests the client completed. Prints each run, then
# medians of ROUNDS rounds and, per case, the ratio of the medians and the
# median of each round's ratio against nginx.
#
# Environment: P (default 1), CASES, ROUNDS (default 5), DURATION (default
# 8s), CONNS (default 32), H2STREAMS (h2load streams per connection,
# default 10), THREADS (wrk/h2load threads; default the load cores, at most
# 4), GATEWAY_FLAGS (more gateway flags, split on spaces, e.g.
# "--otlp-endpoint http://127.0.0.1:18191 --otlp-sample-ratio 0.01" to
# measure tracing at 1 %: spans go to the upstream nginx, which refuses them,
# so their encoding and sending is counted and nothing is collected). Tools:
# see scripts/bench-tools.sh (TOOLS=dir for carried nginx, wrk,
# h2load and redis-server with their libraries and loader). Needs P+1
# cores; prints what it cannot pin and stops on a smaller machine.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
source scripts/bench-tools.sh

P=${P:-1}
CASES=${CASES:-local batched exact jwt tls h2 h2c grpc preview}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-8s}
CONNS=${CONNS:-32}
H2STREAMS=${H2STREAMS:-10}
SECS=${DURATION%s}
TICK=$(getconf CLK_TCK)
NCPU=$(nproc)
if ((NCPU < P + 1)); then
	die "P=$P dedicated proxy cores need $((P + 1)) cores (P for the proxy, at least one for load, upstreams and Redis); this machine has $NCPU"
fi
PROXY_CORES=$(core_list 0 $((P - 1)))
LOAD_CORES=$(core_list "$P" $((NCPU - 1)))
NLOAD=$((NCPU - P))
THREADS=${THREADS:-$((NLOAD < 4 ? NLOAD : 4))}
if ((NLOAD < P)); then
	say "note: $NLOAD load core(s) for $P proxy core(s): the client side may saturate before the proxy does"
fi
command -v taskset >/dev/null || die "taskset is needed (util-linux)"

UP=18191 GRPCUP=18192 NGX=18193 NGXTLS=18194 NGXH2C=18195 NGXGRPC=18196
GW=18197 GWADMIN=18198 GWTLS=18199 REDISPORT=18190 IDP=18189
PVETCD=18187 PVPEER=18188 GWPV=18185 GWPVADMIN=18186

bench_workdir sluice-dedicated
bench_tools "$work"
bench_tls_files "$work"
mkdir -p "$work/up" "$work/ngx"

# The jwt case's identity provider: demo-upstream mints a token (alice, plan
# pro, 30 days) with a fresh Ed25519 key and serves the public half once,
# which is saved as the identity's JWKS file.
case " $CASES " in *" jwt "*)
	if [ -z "${DEMO_BIN:-}" ]; then
		if [ -n "${TOOLS:-}" ]; then DEMO_BIN=$TOOLS/bin/demo-upstream; else DEMO_BIN=bin/demo-upstream; fi
	fi
	[ -x "$DEMO_BIN" ] || die "no $DEMO_BIN for the jwt case: run make build first (or set DEMO_BIN)"
	JWT_TOKEN=$("$DEMO_BIN" --jwt-key "$work/idp.key" --print-tokens | awk '$1 == "alice" {print $3}')
	[ -n "$JWT_TOKEN" ] || die "demo-upstream minted no token"
	"$DEMO_BIN" --listen "127.0.0.1:$IDP" --jwt-key "$work/idp.key" >"$work/idp.log" 2>&1 &
	idp_pid=$!
	pids+=($idp_pid)
	wait_port "$IDP"
	curl -fsS -o "$work/jwks.json" "http://127.0.0.1:$IDP/.well-known/jwks.json" || die "could not fetch the demo JWKS"
	kill "$idp_pid" && wait "$idp_pid" 2>/dev/null || true
	;;
esac

# The preview case's etcd side: previewbench (see the header).
case " $CASES " in *" preview "*)
	if [ -z "${PREVIEWBENCH_BIN:-}" ]; then
		if [ -n "${TOOLS:-}" ]; then
			PREVIEWBENCH_BIN=$TOOLS/bin/previewbench
		else
			PREVIEWBENCH_BIN=$work/previewbench
			(cd dataplane && go build -o "$PREVIEWBENCH_BIN" ./internal/cmd/previewbench) || die "could not build previewbench"
		fi
	fi
	[ -x "$PREVIEWBENCH_BIN" ] || die "no previewbench binary at $PREVIEWBENCH_BIN"
	mkdir -p "$work/pv"
	# twenty RATE: the preview case's rule set, 20 limits on route pv.
	twenty() {
		printf 'namespace: bench\nroutes:\n  - {id: pv, match: {pathPrefix: /pv}, upstream: {targets: [{url: "http://127.0.0.1:%s"}]}}\nlimits:\n' "$UP"
		for l in $(seq 0 19); do
			printf '  - {id: l%d, routes: [pv], key: [ip, "header:X-User"], algorithm: token_bucket, rate: %d, period: 1s}\n' "$l" "$1"
		done
	}
	twenty 1000000000 >"$work/pv/live.yaml"
	twenty 100000000 >"$work/pv/tight.yaml"
	;;
esac

# The upstream: one nginx worker answering a fixed 13-byte body.
cat >"$work/up/nginx.conf" <<EOT
worker_processes 1;
error_log $work/up/error.log warn;
pid $work/up/nginx.pid;
events { worker_connections 8192; }
http {
  access_log off;
$(nginx_temp_paths "$work/up/tmp")
  server {
    listen 127.0.0.1:$UP backlog=4096;
    keepalive_requests 1000000;
    location / { default_type text/plain; return 200 "hello, world\n"; }
  }
}
EOT

# nginx, the peer: the same per-IP limit, upstream keep-alive, forwarded
# headers; TLS h1 and h2 on one port, h2c on another, gRPC on a third.
cat >"$work/ngx/nginx.conf" <<EOT
worker_processes $P;
error_log $work/ngx/error.log warn;
pid $work/ngx/nginx.pid;
events { worker_connections 8192; }
http {
  access_log off;
$(nginx_temp_paths "$work/ngx/tmp")
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=1000000r/s;
  upstream up { server 127.0.0.1:$UP; keepalive 256; }
  upstream grpcup { server 127.0.0.1:$GRPCUP; keepalive 256; }
  keepalive_requests 1000000;
  ssl_certificate $work/tls.crt;
  ssl_certificate_key $work/tls.key;
  ssl_protocols TLSv1.2 TLSv1.3;
  server {
    listen 127.0.0.1:$NGX backlog=4096;
    listen 127.0.0.1:$NGXTLS ssl http2 backlog=4096;
    listen 127.0.0.1:$NGXH2C http2 backlog=4096;
    location / {
      limit_req zone=perip burst=1000000 nodelay;
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto \$scheme;
    }
  }
  server {
    listen 127.0.0.1:$NGXGRPC http2 backlog=4096;
    location / {
      limit_req zone=perip burst=1000000 nodelay;
      grpc_pass grpc://grpcup;
      grpc_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }
}
EOT

# The gateway's rules: the same limit on the local and gRPC routes, and
# the cluster routes with it shared through Redis.
limit() { # id route scope mode
	cat <<EOT
  - id: $1
    routes: [$2]
    key: [ip]
    algorithm: token_bucket
    rate: 1000000
    period: 1s
    burst: 1000000
EOT
	if [ "$3" = cluster ]; then printf '    scope: cluster\n    mode: %s\n' "$4"; fi
}
cat >"$work/rules.yaml" <<EOT
namespace: bench
routes:
  - {id: local, match: {pathPrefix: /local}, upstream: {targets: [{url: "http://127.0.0.1:$UP"}]}}
  - {id: batched, match: {pathPrefix: /batched}, upstream: {targets: [{url: "http://127.0.0.1:$UP"}]}}
  - {id: exact, match: {pathPrefix: /exact}, upstream: {targets: [{url: "http://127.0.0.1:$UP"}]}}
  - {id: grpc, match: {pathPrefix: /grpc.health.v1.Health/}, upstream: {targets: [{url: "h2c://127.0.0.1:$GRPCUP"}]}}
$(case " $CASES " in *" jwt "*) cat <<EOJ
  - {id: jwt, match: {pathPrefix: /jwt}, upstream: {targets: [{url: "http://127.0.0.1:$UP"}]}}
identities:
  - id: bench-users
    routes: [jwt]
    jwt:
      jwks: {file: $work/jwks.json}
      issuer: https://idp.demo.sluice
      audiences: [demo]
      algorithms: [EdDSA]
      required: true
EOJ
esac)
limits:
$(limit per-ip local local)
$(case " $CASES " in *" jwt "*) cat <<EOJ
  - id: per-user
    routes: [jwt]
    key: [jwt:sub]
    algorithm: token_bucket
    rate: 1000000
    period: 1s
    burst: 1000000
    tiers:
      - {id: pro, match: {claims: {plan: pro}}, rate: 1000000, burst: 1000000}
      - {id: free, rate: 500000, burst: 500000}
EOJ
esac)
$(limit per-ip-grpc grpc local)
$(limit shared-batched batched cluster batched)
$(limit shared-exact exact cluster exact)
EOT

# taskset execs what it runs, so $! of "${on_load[@]}" CMD & is CMD's pid,
# whose CPU is read and which the cleanup kills.
on_load=(taskset -c "$LOAD_CORES")
on_proxy=(taskset -c "$PROXY_CORES")

"${on_load[@]}" "${REDIS[@]}" --bind 127.0.0.1 --port "$REDISPORT" --save "" --appendonly no >"$work/redis.log" 2>&1 &
pids+=($!)
"${on_load[@]}" "${NGINX[@]}" -e "$work/up/error.log" -p "$work/up" -c "$work/up/nginx.conf" -g 'daemon off;' &
pids+=($!)
"${on_load[@]}" "$GRPCBENCH_BIN" serve --listen "127.0.0.1:$GRPCUP" 2>"$work/grpcup.log" &
pids+=($!)
"${on_proxy[@]}" "${NGINX[@]}" -e "$work/ngx/error.log" -p "$work/ngx" -c "$work/ngx/nginx.conf" -g 'daemon off;' &
ngx_pid=$!
pids+=($ngx_pid)
wait_port "$REDISPORT"
"${on_proxy[@]}" env GOMAXPROCS="$P" "$GATEWAY_BIN" --rules "$work/rules.yaml" --listen "127.0.0.1:$GW" --admin "127.0.0.1:$GWADMIN" \
	--listen-tls "127.0.0.1:$GWTLS" --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
	--event-loops "$P" --redis "redis://127.0.0.1:$REDISPORT" --redis-prefix "bench-$$:" \
	--log-level warn ${GATEWAY_FLAGS:-} 2>"$work/gw.log" &
gw_pid=$!
pids+=($gw_pid)
gwpv_pid=
case " $CASES " in *" preview "*)
	"${on_load[@]}" "$PREVIEWBENCH_BIN" serve --dir "$work/pv" --listen "127.0.0.1:$PVETCD" --peer "127.0.0.1:$PVPEER" \
		--namespace bench --rules "$work/pv/live.yaml" 2>"$work/pv/previewbench.log" &
	pids+=($!)
	wait_port "$PVETCD"
	for _ in $(seq 100); do grep -q published "$work/pv/previewbench.log" && break; sleep 0.1; done
	grep -q published "$work/pv/previewbench.log" || die "previewbench published no rules; see $work/pv/previewbench.log"
	"${on_proxy[@]}" env GOMAXPROCS="$P" "$GATEWAY_BIN" --etcd "127.0.0.1:$PVETCD" --namespace bench --node-id bench-pv \
		--trust-keys "$work/pv/trust.pem" --state-dir "$work/pv/state" --listen "127.0.0.1:$GWPV" --admin "127.0.0.1:$GWPVADMIN" \
		--event-loops "$P" --log-level warn 2>"$work/gwpv.log" &
	gwpv_pid=$!
	pids+=($gwpv_pid)
	wait_port "$GWPV"
	;;
esac
for port in $UP $GRPCUP $NGX $NGXTLS $NGXH2C $NGXGRPC $GW $GWTLS; do wait_port "$port"; done
sleep 0.5
[ "$(cat "/proc/$gw_pid/comm")" = "$(basename "$GATEWAY_BIN" | cut -c1-15)" ] || die "pid $gw_pid is not the gateway: its CPU would not be what is read"
if [ -n "$gwpv_pid" ]; then
	[ "$(cat "/proc/$gwpv_pid/comm")" = "$(basename "$GATEWAY_BIN" | cut -c1-15)" ] || die "pid $gwpv_pid is not the preview gateway"
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-User: alice' "http://127.0.0.1:$GWPV/pv")
	[ "$code" = 200 ] || die "the preview gateway answers $code on /pv, not 200: are the rules from etcd applied? see $work/gwpv.log"
	curl -fsS "http://127.0.0.1:$GWPVADMIN/status" | tr -d ' \n' | grep -q '"limits":20,' || die "the preview gateway does not run the 20 limits; see $work/gwpv.log"
fi
ngx_all="$ngx_pid $(ps -o pid= --ppid "$ngx_pid" | tr '\n' ' ')"

case " $CASES " in *" grpc "*)
	"${on_load[@]}" "$GRPCBENCH_BIN" check --addr "127.0.0.1:$NGXGRPC" --n 200 || die "nginx grpc_pass does not answer the health call OK"
	"${on_load[@]}" "$GRPCBENCH_BIN" check --addr "127.0.0.1:$GW" --n 200 || die "the gateway does not answer the health call OK; see $work/gw.log"
	;;
esac
# The jwt route must go through the identity: 401 without the token, 200
# with it (else its runs would measure something else).
case " $CASES " in *" jwt "*)
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GW/jwt")
	[ "$code" = 401 ] || die "the jwt route answers $code without a token, not 401: is the identity applied? see $work/gw.log"
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $JWT_TOKEN" "http://127.0.0.1:$GW/jwt")
	[ "$code" = 200 ] || die "the jwt route answers $code to the demo token, not 200; see $work/gw.log"
	;;
esac
printf '\0\0\0\0\0' >"$work/grpc-req.bin" # an empty HealthCheckRequest, framed

declare -A rps cpu procs
procs[nginx]=$ngx_all
procs[sluice]=$gw_pid
record() { # name round rps requests ticks note
	local us
	us=$(awk -v t="$5" -v n="$4" -v hz="$TICK" 'BEGIN{ if (n > 0) printf "%.2f", t / hz * 1e6 / n; else print 0 }')
	rps[$1]+="$3 "
	cpu[$1]+="$us "
	printf '%-14s round %d: %10.0f req/s  cpu %7.2f us/req %s\n' "$1" "$2" "$3" "$us" "$6"
}
run_wrk() { # name pids url round [wrk args...]
	local name=$1 ps=$2 url=$3 round=$4 out before after r n errs
	shift 4
	# shellcheck disable=SC2086 # the pid list splits on purpose
	before=$(cpu_ticks $ps)
	out=$("${on_load[@]}" "${WRK[@]}" -t"$THREADS" -c"$CONNS" -d"$DURATION" "$@" "$url" 2>&1)
	# shellcheck disable=SC2086
	after=$(cpu_ticks $ps)
	r=$(awk '/^Requests\/sec:/{print $2}' <<<"$out")
	n=$(awk '/requests in/{print $1}' <<<"$out")
	errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
	record "$name" "$round" "$r" "$n" "$((after - before))" "$errs"
}
run_h2load() { # name pids url round [h2load args...]
	local name=$1 ps=$2 url=$3 round=$4 out before after r n failed proto
	shift 4
	# shellcheck disable=SC2086
	before=$(cpu_ticks $ps)
	out=$("${on_load[@]}" "${H2LOAD[@]}" -c"$CONNS" -m"$H2STREAMS" -t"$THREADS" -D"$SECS" "$@" "$url" 2>&1)
	# shellcheck disable=SC2086
	after=$(cpu_ticks $ps)
	proto=$(awk '/^Application protocol:/{print $3}' <<<"$out")
	case "$proto" in h2 | h2c) ;; *) die "$name: h2load negotiated '${proto:-nothing}', not HTTP/2: $out" ;; esac
	r=$(awk '/^finished in/{gsub(",",""); print $4}' <<<"$out")
	n=$(awk '/^requests:/{print $8}' <<<"$out") # succeeded
	failed=$(awk '/^requests:/{print $10}' <<<"$out")
	record "$name" "$round" "$r" "$n" "$((after - before))" "$([ "${failed:-0}" != 0 ] && echo "failed: $failed")"
}
# pv_state on|off puts or deletes the preview value and waits until the
# node's /status says its preview runs (change "bench") or none does.
pv_state() {
	local want=
	if [ "$1" = on ]; then
		want=bench
		"$PREVIEWBENCH_BIN" preview --etcd "127.0.0.1:$PVETCD" --namespace bench --key "$work/pv/sign.pem" --rules "$work/pv/tight.yaml" || die "could not write the preview"
	else
		"$PREVIEWBENCH_BIN" preview --etcd "127.0.0.1:$PVETCD" --namespace bench --stop || die "could not delete the preview"
	fi
	local got
	for _ in $(seq 100); do
		got=$(curl -fsS "http://127.0.0.1:$GWPVADMIN/status" | tr -d ' \n' | grep -o '"preview":{[^}]*}' | grep -o '"change":"[^"]*"' | cut -d'"' -f4 || true)
		[ "$got" = "$want" ] && return 0
		sleep 0.1
	done
	die "the preview gateway's /status says preview '${got:-none}', want '${want:-none}'; see $work/gwpv.log"
}
run_pv() { # on|off round
	pv_state "$1"
	run_wrk "sluice-pv-$1" "$gwpv_pid" "http://127.0.0.1:$GWPV/pv" "$2" -H "X-User: alice"
}
grpc_args=(-d "$work/grpc-req.bin" -H 'content-type: application/grpc' -H 'te: trailers')

# run_case CASE ROUND runs the case's nginx and gateway runs, in that order
# in odd rounds and the other way round in even ones.
run_case() {
	local c=$1 i=$2 a b
	case $c in
	local | batched | exact)
		a=(run_wrk "nginx-h1" "$ngx_all" "http://127.0.0.1:$NGX/$c" "$i")
		b=(run_wrk "sluice-$c" "$gw_pid" "http://127.0.0.1:$GW/$c" "$i") ;;
	jwt)
		a=(run_wrk "sluice-local" "$gw_pid" "http://127.0.0.1:$GW/local" "$i")
		b=(run_wrk "sluice-jwt" "$gw_pid" "http://127.0.0.1:$GW/jwt" "$i" -H "Authorization: Bearer $JWT_TOKEN") ;;
	tls)
		a=(run_wrk "nginx-tls" "$ngx_all" "https://127.0.0.1:$NGXTLS/local" "$i")
		b=(run_wrk "sluice-tls" "$gw_pid" "https://127.0.0.1:$GWTLS/local" "$i") ;;
	h2)
		a=(run_h2load "nginx-h2" "$ngx_all" "https://127.0.0.1:$NGXTLS/local" "$i")
		b=(run_h2load "sluice-h2" "$gw_pid" "https://127.0.0.1:$GWTLS/local" "$i") ;;
	h2c)
		a=(run_h2load "nginx-h2c" "$ngx_all" "http://127.0.0.1:$NGXH2C/local" "$i")
		b=(run_h2load "sluice-h2c" "$gw_pid" "http://127.0.0.1:$GW/local" "$i") ;;
	grpc)
		a=(run_h2load "nginx-grpc" "$ngx_all" "http://127.0.0.1:$NGXGRPC/grpc.health.v1.Health/Check" "$i" "${grpc_args[@]}")
		b=(run_h2load "sluice-grpc" "$gw_pid" "http://127.0.0.1:$GW/grpc.health.v1.Health/Check" "$i" "${grpc_args[@]}") ;;
	preview)
		a=(run_pv off "$i")
		b=(run_pv on "$i") ;;
	*) die "unknown case $c (local batched exact jwt tls h2 h2c grpc preview)" ;;
	esac
	# The three HTTP/1.1 cases share one nginx peer run per round; jwt
	# shares the gateway's local run.
	if [ "$c" = batched ] || [ "$c" = exact ] || [ "$c" = jwt ]; then
		case " $CASES " in *" local "*) "${b[@]}"; return ;; esac
	fi
	if ((i % 2)); then "${a[@]}"; "${b[@]}"; else "${b[@]}"; "${a[@]}"; fi
}

say "proxies on core(s) $PROXY_CORES (nginx worker_processes $P; gateway GOMAXPROCS=$P --event-loops $P); load, upstreams and Redis on $LOAD_CORES"
say "warming up"
for c in $CASES; do DURATION=2s SECS=2 run_case "$c" 0 >/dev/null; done
unset rps cpu
declare -A rps cpu
say "wrk -t$THREADS -c$CONNS -d$DURATION; h2load -t$THREADS -c$CONNS -m$H2STREAMS -D$SECS; $ROUNDS rounds; cases: $CASES"
for i in $(seq "$ROUNDS"); do
	for c in $CASES; do run_case "$c" "$i"; done
done

echo
echo "medians of $ROUNDS rounds, proxy on $P dedicated core(s) ($(date -u +%F), $NCPU cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-14s %12s %12s\n' target "req/s" "cpu us/req"
for t in nginx-h1 sluice-local sluice-batched sluice-exact sluice-jwt nginx-tls sluice-tls nginx-h2 sluice-h2 nginx-h2c sluice-h2c nginx-grpc sluice-grpc sluice-pv-off sluice-pv-on; do
	[ -n "${rps[$t]:-}" ] || continue
	printf '%-14s %12.0f %12.2f\n' "$t" "$(median "${rps[$t]}")" "$(median "${cpu[$t]}")"
done
echo
printf '%-8s %-14s %-11s %-16s %-11s %-16s %s\n' case peer "cpu/req" "cpu per round" "rps" "rps per round" "target (cpu/req vs nginx)"
line() { # case sluice nginx target
	[ -n "${rps[$2]:-}" ] && [ -n "${rps[$3]:-}" ] || return 0
	printf '%-8s %-14s %-11s %-16s %-11s %-16s %s\n' "$1" "$3" \
		"$(ratio "$(median "${cpu[$2]}")" "$(median "${cpu[$3]}")")" "$(rratio "${cpu[$2]}" "${cpu[$3]}")" \
		"$(ratio "$(median "${rps[$2]}")" "$(median "${rps[$3]}")")" "$(rratio "${rps[$2]}" "${rps[$3]}")" "$4"
}
line local sluice-local nginx-h1 "<= 1.05x"
line batched sluice-batched nginx-h1 "<= 1.10x"
line exact sluice-exact nginx-h1 "reported"
line jwt sluice-jwt sluice-local "<= 1.15x (vs the gateway's ip-keyed local)"
line tls sluice-tls nginx-tls "<= 1.10x"
line h2 sluice-h2 nginx-h2 "<= 1.5x"
line h2c sluice-h2c nginx-h2c "reported"
line grpc sluice-grpc nginx-grpc "<= 1.5x"
line preview sluice-pv-on sluice-pv-off "<= 1.3x (vs the same gateway with no preview)"
