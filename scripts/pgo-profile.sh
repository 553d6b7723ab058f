#!/usr/bin/env bash
# make pgo-profile: records the CPU profile sluice-gateway is built with
# (profile-guided optimization: dataplane/cmd/sluice-gateway/default.pgo,
# which `go build` of that main package uses by itself, -pgo=auto).
#
# The profile is of the gateway under the traffic a gateway mostly serves,
# on loopback against one nginx upstream, with the rules of make
# bench-proxy (one route, a non-rejecting per-IP token bucket): keep-alive
# HTTP/1.1 over cleartext (wrk), then over TLS, then HTTP/2 (h2c and TLS
# h2, h2load), in one profile of the whole run. A rejecting limit (a second
# route, keyed on the client and a header) is exercised too, so that the
# 429 path is not left cold. Rebuild with make build afterwards; BENCHMARKS.md
# says what the profile is worth.
#
# Environment: SECS (seconds of cleartext HTTP/1.1, default 20; the other
# phases take a quarter of it each), OUT (default
# dataplane/cmd/sluice-gateway/default.pgo).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_pkg wrk wrk
ensure_pkg nginx nginx-light
ensure_pkg h2load nghttp2-client
ensure_pkg openssl openssl

SECS=${SECS:-20}
OUT=${OUT:-dataplane/cmd/sluice-gateway/default.pgo}
UP=18191 GW=18193 GWADMIN=18194 GWTLS=18198
[ -x bin/sluice-gateway ] || die "bin/sluice-gateway is missing: run make build"

bench_workdir sluice-pgo

bench_cert "$work"
mkdir -p "$work/up"
bench_upstream_conf "$work/up" "$UP"
bench_rules "$work/rules.yaml" "$UP"
# A second route whose limit rejects most of what it gets (429s).
cat >>"$work/rules.yaml" <<EOT
  - id: tight
    key: [ip, "header:X-User"]
    algorithm: token_bucket
    rate: 10
    period: 1s
    burst: 10
    routes: [tight]
EOT
sed -i "s#^routes:#routes:\n  - id: tight\n    match: {pathPrefix: /tight}\n    upstream: {targets: [{url: \"http://127.0.0.1:$UP\"}]}#" "$work/rules.yaml"

nginx -p "$work/up" -c "$work/up/nginx.conf" -g 'daemon off;' & pids+=($!)
bin/sluice-gateway --rules "$work/rules.yaml" --listen "127.0.0.1:$GW" --admin "127.0.0.1:$GWADMIN" \
	--listen-tls "127.0.0.1:$GWTLS" --tls-cert "$work/tls.crt" --tls-key "$work/tls.key" \
	--pprof --log-level error 2>"$work/gw.log" & pids+=($!)
for url in "http://127.0.0.1:$GW/" "https://127.0.0.1:$GWTLS/"; do
	for _ in $(seq 100); do curl -kfsS -o /dev/null "$url" 2>/dev/null && break; sleep 0.1; done
	curl -kfsS -o /dev/null "$url" || die "the gateway does not answer at $url; see $work/gw.log"
done
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-User: u' "http://127.0.0.1:$GW/tight")
[ "$code" = 200 ] || die "the tight route answers $code, not 200; see $work/gw.log"

q=$((SECS / 4))
[ "$q" -ge 1 ] || q=1
total=$((SECS + 4 * q + 2))
say "profiling sluice-gateway for ${total}s: HTTP/1.1 ${SECS}s, rejections ${q}s, TLS ${q}s, h2c ${q}s, TLS h2 ${q}s"
curl -fsS -o "$work/cpu.pprof" "http://127.0.0.1:$GWADMIN/debug/pprof/profile?seconds=$total" & prof=$!
sleep 1
wrk -t1 -c32 -d"${SECS}s" "http://127.0.0.1:$GW/bench" >/dev/null
wrk -t1 -c8 -d"${q}s" -H 'X-User: u' "http://127.0.0.1:$GW/tight" >/dev/null
wrk -t1 -c32 -d"${q}s" "https://127.0.0.1:$GWTLS/bench" >/dev/null
h2load -c32 -m10 -D"$q" "http://127.0.0.1:$GW/bench" >/dev/null
h2load -c32 -m10 -D"$q" "https://127.0.0.1:$GWTLS/bench" >/dev/null
wait "$prof" || die "fetching the profile failed; see $work/gw.log"
[ -s "$work/cpu.pprof" ] || die "the profile is empty"
cp "$work/cpu.pprof" "$OUT"
say "wrote $OUT ($(wc -c <"$OUT") bytes); run make build to build with it"
