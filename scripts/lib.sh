# Shared helpers for the scripts in this folder. Source it; do not run it.

say() { printf '\033[1m==>\033[0m %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_redis starts the machine's Redis on 127.0.0.1:6379 when it is
# installed but not answering, installs it with apt when it is missing and we
# are root, and otherwise says exactly what is missing.
ensure_redis() {
	if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then return 0; fi
	if ! command -v redis-server >/dev/null 2>&1; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			say "installing redis-server (apt)"
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
		else
			die "Redis is needed at 127.0.0.1:6379: install redis-server (Debian: apt-get install redis-server)"
		fi
	fi
	say "starting redis-server on 127.0.0.1:6379"
	redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
	for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && return 0; sleep 0.1; done
	die "redis-server did not start on 127.0.0.1:6379"
}

# ensure_pkg CMD PACKAGE installs a Debian package when CMD is missing.
ensure_pkg() {
	command -v "$1" >/dev/null 2>&1 && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		say "installing $2 (apt) for $1"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
	fi
	command -v "$1" >/dev/null 2>&1 || die "$1 is needed: install the Debian package $2 (apt-get install $2)"
}

# ensure_postgres makes sure a Postgres server answers on 127.0.0.1:5432 with
# trust auth for the postgres user: it starts the installed cluster when it is
# down, installs the Debian package when none is installed and we are root,
# and otherwise says exactly what is missing.
ensure_postgres() {
	if pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then return 0; fi
	if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			say "installing postgresql (apt)"
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
			local hba
			hba=$(ls /etc/postgresql/*/main/pg_hba.conf | head -1)
			# Local development only: trust loopback connections.
			sed -i -E 's/^(host\s+all\s+all\s+127\.0\.0\.1\/32\s+)\S+/\1trust/; s/^(host\s+all\s+all\s+::1\/128\s+)\S+/\1trust/' "$hba"
		else
			die "Postgres is needed at 127.0.0.1:5432 (trust auth for user postgres): install postgresql (Debian: apt-get install postgresql)"
		fi
	fi
	if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
		say "starting postgresql"
		pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start 2>/dev/null ||
			pg_ctlcluster "$(ls /etc/postgresql | head -1)" main start ||
			die "could not start Postgres; start it and retry (pg_ctlcluster <version> main start)"
	fi
	for _ in $(seq 100); do pg_isready -h 127.0.0.1 -p 5432 -q && return 0; sleep 0.1; done
	die "Postgres did not come up on 127.0.0.1:5432"
}

# ensure_node makes sure Node.js 20.19 or newer and npm are installed (the
# console's build tools need them); it installs Debian's nodejs and npm when
# node is missing and we are root, and otherwise names what is missing.
ensure_node() {
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			say "installing nodejs and npm (apt)"
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
		fi
	fi
	command -v node >/dev/null 2>&1 || die "Node.js 20.19 or newer is needed to build the console (web/): install nodejs and npm"
	node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)' ||
		die "Node.js $(node -v) is too old for the console's build (Vite 8): install Node.js 20.19 or newer"
}

# ensure_web_deps runs npm ci in web/ when node_modules is missing or older
# than package-lock.json.
ensure_web_deps() {
	ensure_node
	if [ ! -f web/node_modules/.package-lock.json ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
		say "installing the console's packages (npm ci)"
		(cd web && npm ci --no-audit --no-fund --loglevel=error)
	fi
}

# ensure_chromium makes sure Debian's chromium is installed for the
# console's end-to-end tests (Playwright drives it; its own browser
# downloads do not work here).
ensure_chromium() {
	CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
	[ -x "$CHROMIUM" ] && return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		say "installing chromium (apt) for the console's end-to-end tests"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
	fi
	[ -x "$CHROMIUM" ] || die "the console's end-to-end tests need Chromium at $CHROMIUM: install the Debian package chromium (apt-get install chromium)"
}

# The proxy benchmarks (bench-proxy.sh, bench-insn.sh, bench-engine-ab.sh,
# pgo-profile.sh) compare the gateway with nginx on the same upstream and the
# same limit; these write that setup once.

# bench_workdir NAME makes the benchmark's scratch directory, $work
# (/tmp/NAME.XXXXXX), and the array pids, whose processes are killed, and
# $work removed, when the script ends.
bench_workdir() {
	work=$(mktemp -d "/tmp/$1.XXXXXX")
	pids=()
	trap bench_cleanup EXIT INT TERM
}

bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}

# bench_cert DIR writes DIR/tls.crt and DIR/tls.key: a self-signed P-256
# certificate for 127.0.0.1, for every TLS listener of a benchmark.
bench_cert() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
		-keyout "$1/tls.key" -out "$1/tls.crt" 2>/dev/null
}

# bench_upstream_conf DIR PORT writes DIR/nginx.conf: one nginx worker on
# 127.0.0.1:PORT answering every request with a fixed 13-byte body.
bench_upstream_conf() {
	cat >"$1/nginx.conf" <<EOT
worker_processes 1;
error_log $1/error.log warn;
pid $1/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  server {
    listen 127.0.0.1:$2;
    keepalive_requests 1000000;
    location / { default_type text/plain; return 200 "hello, world\n"; }
  }
}
EOT
}

# bench_proxy_conf DIR UPSTREAM_PORT PROCESS LISTEN [HTTP] writes
# DIR/nginx.conf: nginx as the gateway's peer, proxy_pass to the upstream
# with keep-alive, a non-rejecting per-IP limit_req and X-Forwarded-For and
# -Proto set. PROCESS is the top-level lines (worker_processes, ...), LISTEN
# the server's listen lines, HTTP more lines for the http block (TLS files).
bench_proxy_conf() {
	cat >"$1/nginx.conf" <<EOT
$3
error_log $1/error.log warn;
pid $1/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  limit_req_zone \$binary_remote_addr zone=perip:10m rate=1000000r/s;
  upstream up { server 127.0.0.1:$2; keepalive 256; }
  keepalive_requests 1000000;
${5:-}
  server {
$4
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
}

# bench_rules FILE UPSTREAM_PORT writes the gateway's rules: one route to the
# upstream and the per-IP token bucket matching bench_proxy_conf's limit_req.
bench_rules() {
	cat >"$1" <<EOT
namespace: bench
routes:
  - id: all
    match: {pathPrefix: /}
    upstream: {targets: [{url: "http://127.0.0.1:$2"}]}
limits:
  - id: per-ip
    key: [ip]
    algorithm: token_bucket
    rate: 1000000
    period: 1s
    burst: 1000000
EOT
}
