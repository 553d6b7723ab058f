# Where the proxy benchmarks find their tools. Source it; do not run it.
#
# By default nginx, wrk, h2load, redis-server and openssl come from PATH
# (Debian packages nginx-light, wrk, nghttp2-client, redis-server, openssl,
# installed on demand as root), and the Go binaries are built from this tree.
#
# Carried tools: on a machine without a package registry or a Go toolchain
# (a many-core box for bench-scaling.sh), copy a directory TOOLS laid out as
#
#   $TOOLS/bin/nginx  $TOOLS/bin/wrk  $TOOLS/bin/h2load  $TOOLS/bin/redis-server
#   $TOOLS/bin/sluice-gateway  $TOOLS/bin/grpcbench       (stripped Go binaries:
#                                  go build -ldflags='-s -w' ./dataplane/cmd/sluice-gateway
#                                  ./dataplane/internal/cmd/grpcbench)
#   $TOOLS/bin/previewbench        (the same, ./dataplane/internal/cmd/previewbench;
#                                  only bench-dedicated.sh's preview case)
#   $TOOLS/lib/ld-linux-x86-64.so.2 and every shared library the four tools
#       load (ldd bin/nginx bin/wrk bin/h2load bin/redis-server: libc, libssl,
#       libcrypto, libpcre2, libz, libnghttp2, libev, libluajit, ...)
#
# and set TOOLS=/path/to/it: each C tool then runs as
# "$TOOLS/lib/ld-linux-x86-64.so.2 --library-path $TOOLS/lib $TOOLS/bin/NAME",
# which needs nothing of the host's libraries. nginx gets every temp path
# (client_body_temp_path and friends) and its error log under the run's
# scratch directory, so that it never touches /var/lib/nginx or /var/log.
# Without openssl, give the certificate as TLS_CERT and TLS_KEY (PEM files;
# a self-signed P-256 certificate for 127.0.0.1).
#
# Single tools can be pointed at separately: NGINX_BIN, WRK_BIN, H2LOAD_BIN,
# REDIS_BIN (a binary run as is, or through the TOOLS loader when TOOLS is
# set), GATEWAY_BIN, GRPCBENCH_BIN.

# bench_tools sets the arrays NGINX, WRK, H2LOAD and REDIS (commands to run,
# to which arguments are appended) and GATEWAY_BIN and GRPCBENCH_BIN; with
# no TOOLS it installs what is missing (root and apt) and builds the Go
# binaries into $1.
bench_tools() {
	local out=$1 name
	if [ -n "${TOOLS:-}" ]; then
		[ -x "$TOOLS/lib/ld-linux-x86-64.so.2" ] || die "TOOLS=$TOOLS: no lib/ld-linux-x86-64.so.2 there"
		local ld=("$TOOLS/lib/ld-linux-x86-64.so.2" --library-path "$TOOLS/lib")
		for name in nginx wrk h2load redis-server; do
			[ -x "$TOOLS/bin/$name" ] || die "TOOLS=$TOOLS: no bin/$name there"
		done
		NGINX=("${ld[@]}" "${NGINX_BIN:-$TOOLS/bin/nginx}")
		WRK=("${ld[@]}" "${WRK_BIN:-$TOOLS/bin/wrk}")
		H2LOAD=("${ld[@]}" "${H2LOAD_BIN:-$TOOLS/bin/h2load}")
		REDIS=("${ld[@]}" "${REDIS_BIN:-$TOOLS/bin/redis-server}")
		GATEWAY_BIN=${GATEWAY_BIN:-$TOOLS/bin/sluice-gateway}
		GRPCBENCH_BIN=${GRPCBENCH_BIN:-$TOOLS/bin/grpcbench}
	else
		[ -n "${NGINX_BIN:-}" ] || ensure_pkg nginx nginx-light
		[ -n "${WRK_BIN:-}" ] || ensure_pkg wrk wrk
		[ -n "${H2LOAD_BIN:-}" ] || ensure_pkg h2load nghttp2-client
		[ -n "${REDIS_BIN:-}" ] || ensure_pkg redis-server redis-server
		NGINX=("${NGINX_BIN:-nginx}")
		WRK=("${WRK_BIN:-wrk}")
		H2LOAD=("${H2LOAD_BIN:-h2load}")
		REDIS=("${REDIS_BIN:-redis-server}")
		if [ -z "${GATEWAY_BIN:-}" ]; then
			GATEWAY_BIN=bin/sluice-gateway
			[ -x "$GATEWAY_BIN" ] || die "no $GATEWAY_BIN: run make build first (or set GATEWAY_BIN)"
		fi
		if [ -z "${GRPCBENCH_BIN:-}" ]; then
			GRPCBENCH_BIN=$out/grpcbench
			(cd dataplane && go build -o "$GRPCBENCH_BIN" ./internal/cmd/grpcbench) || die "could not build grpcbench"
		fi
	fi
	[ -x "$GATEWAY_BIN" ] || die "no gateway binary at $GATEWAY_BIN"
	[ -x "$GRPCBENCH_BIN" ] || die "no grpcbench binary at $GRPCBENCH_BIN"
}

# bench_tls_files DIR writes DIR/tls.crt and DIR/tls.key, or copies
# TLS_CERT and TLS_KEY there when they are set.
bench_tls_files() {
	if [ -n "${TLS_CERT:-}" ]; then
		cp "$TLS_CERT" "$1/tls.crt" && cp "$TLS_KEY" "$1/tls.key"
	else
		ensure_pkg openssl openssl
		bench_cert "$1"
	fi
}

# nginx_temp_paths DIR prints the http-block lines that keep every nginx
# temp file under DIR.
nginx_temp_paths() {
	mkdir -p "$1"/{body,proxy,fastcgi,uwsgi,scgi}
	cat <<EOT
  client_body_temp_path $1/body;
  proxy_temp_path $1/proxy;
  fastcgi_temp_path $1/fastcgi;
  uwsgi_temp_path $1/uwsgi;
  scgi_temp_path $1/scgi;
EOT
}

# wait_port PORT waits until something accepts on 127.0.0.1:PORT (bash's
# /dev/tcp: no curl needed on a carried-tools machine).
wait_port() {
	local i
	for i in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	die "nothing listens on 127.0.0.1:$1; see $work"
}

# cpu_ticks PID... prints utime+stime clock ticks of the processes, summed
# (a process's stat counts all its threads).
cpu_ticks() {
	local t=0 p
	for p in "$@"; do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat")))
	done
	echo "$t"
}

# median of space-separated numbers.
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2 }'; }

# ratio A B prints A/B as 1.23x.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2fx", a/b; else print "n/a" }'; }

# rratio A B: the median over rounds of A's figure ÷ B's in the same round.
rratio() {
	paste <(tr ' ' '\n' <<<"$1" | grep -v '^$') <(tr ' ' '\n' <<<"$2" | grep -v '^$') |
		awk '$2 > 0 {print $1/$2}' | sort -g | awk '{a[NR]=$1} END{ if (NR == 0) print "n/a"; else if (NR%2) printf "%.2fx", a[(NR+1)/2]; else printf "%.2fx", (a[NR/2]+a[NR/2+1])/2 }'
}

# core_list FROM TO prints "FROM,FROM+1,...,TO" for taskset -c.
core_list() { seq -s, "$1" "$2"; }
