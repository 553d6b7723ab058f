#!/usr/bin/env bash
# make bench-proxy: wrk against (a) the upstream directly, (b) Debian's nginx
# with proxy_pass, upstream keepalive and limit_req, (c) sluice-gateway with the
# equivalent limit. Same upstream (an nginx answering a fixed 13-byte body), same
# wrk settings, rounds interleaved a/b/c so drift on a shared machine hits all
# three alike. Prints each run, then medians and ratios.
#
# Environment: ROUNDS (default 5), DURATION (default 8s), CONNS (default 32),
# THREADS (default 1), PROXY_CPUS (default: nginx's worker_processes auto and
# Go's default GOMAXPROCS; a number N gives both proxies N workers/threads).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_pkg wrk wrk
ensure_pkg nginx nginx-light

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-8s}
CONNS=${CONNS:-32}
THREADS=${THREADS:-1}
UP=18091 NGX=18092 GW=18093 GWADMIN=18094
PROXY_CPUS=${PROXY_CPUS:-auto}
if [ "$PROXY_CPUS" != auto ]; then export GOMAXPROCS=$PROXY_CPUS; fi

work=$(mktemp -d /tmp/sluice-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

mkdir -p "$work/up" "$work/ngx"
cat >"$work/up/nginx.conf" <<EOT
worker_processes 1;
error_log $work/up/error.log warn;
pid $work/up/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  server {
    listen 127.0.0.1:$UP;
    keepalive_requests 1000000;
    location / { default_type text/plain; return 200 "hello, world\n"; }
  }
}
EOT
cat >"$work/ngx/nginx.conf" <<EOT
worker_processes $PROXY_CPUS;
error_log $work/ngx/error.log warn;
pid $work/ngx/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=1000000r/s;
  upstream up { server 127.0.0.1:$UP; keepalive 256; }
  server {
    listen 127.0.0.1:$NGX;
    keepalive_requests 1000000;
    location / {
      limit_req zone=perip burst=1000000 nodelay;
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto \$scheme;
    }
  }
}
EOT
cat >"$work/rules.yaml" <<EOT
namespace: bench
routes:
  - id: all
    match: {pathPrefix: /}
    upstream: {targets: [{url: "http://127.0.0.1:$UP"}]}
limits:
  - id: per-ip
    key: [ip]
    algorithm: token_bucket
    rate: 1000000
    period: 1s
    burst: 1000000
EOT

nginx -p "$work/up" -c "$work/up/nginx.conf" -g 'daemon off;' & pids+=($!)
nginx -p "$work/ngx" -c "$work/ngx/nginx.conf" -g 'daemon off;' & pids+=($!)
bin/sluice-gateway --rules "$work/rules.yaml" --listen "127.0.0.1:$GW" --admin "127.0.0.1:$GWADMIN" --log-level warn 2>"$work/gw.log" & pids+=($!)
for port in $UP $NGX $GW; do
	for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.1; done
	curl -fsS -o /dev/null "http://127.0.0.1:$port/" || die "nothing answers on port $port; see $work"
done

declare -A rps p50 p99
to_ms() { # wrk latency such as 412.00us, 1.20ms, 2.01s → milliseconds
	awk -v v="$1" 'BEGIN{ if (v ~ /us$/) {sub(/us$/,"",v); print v/1000} else if (v ~ /ms$/) {sub(/ms$/,"",v); print v+0} else if (v ~ /s$/) {sub(/s$/,"",v); print v*1000} else print v }'
}
run_one() { # name port round
	local out
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$2/bench" 2>&1)
	local r l50 l99 errs
	r=$(awk '/^Requests\/sec:/{print $2}' <<<"$out")
	l50=$(to_ms "$(awk '$1=="50%"{print $2}' <<<"$out")")
	l99=$(to_ms "$(awk '$1=="99%"{print $2}' <<<"$out")")
	errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
	rps[$1]+="$r "; p50[$1]+="$l50 "; p99[$1]+="$l99 "
	printf '%-8s round %d: %10.0f req/s  p50 %7.3f ms  p99 %7.3f ms %s\n' "$1" "$3" "$r" "$l50" "$l99" "$errs"
}
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }

say "warming up"
for port in $UP $NGX $GW; do wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$port/bench" >/dev/null; done
say "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS rounds; proxies get $PROXY_CPUS CPU(s) (nginx worker_processes, Go GOMAXPROCS)"
for i in $(seq "$ROUNDS"); do
	run_one direct $UP "$i"
	run_one nginx $NGX "$i"
	run_one sluice $GW "$i"
done

echo
printf '%-8s %12s %10s %10s\n' target "req/s" "p50 ms" "p99 ms"
for t in direct nginx sluice; do
	printf '%-8s %12.0f %10.3f %10.3f\n' "$t" "$(median "${rps[$t]}")" "$(median "${p50[$t]}")" "$(median "${p99[$t]}")"
done
awk -v sr="$(median "${rps[sluice]}")" -v nr="$(median "${rps[nginx]}")" \
    -v sp="$(median "${p99[sluice]}")" -v np="$(median "${p99[nginx]}")" -v dp="$(median "${p99[direct]}")" 'BEGIN{
	printf "\nsluice/nginx rps:                 %.2fx  (target >= 0.75x)\n", sr/nr
	an = np-dp; as = sp-dp
	printf "added p99 (vs direct): nginx %.3f ms, sluice %.3f ms", an, as
	if (an > 0) printf " -> %.2fx  (target <= 1.5x)\n", as/an; else printf " (nginx added none measurable)\n"
}'
