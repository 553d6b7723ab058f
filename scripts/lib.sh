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
