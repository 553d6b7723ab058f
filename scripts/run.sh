#!/usr/bin/env bash
# make run: a demo upstream and a gateway node on the sample rules in
# deploy/rules/demo.yaml. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

RULES=${RULES:-deploy/rules/demo.yaml}
LISTEN=${LISTEN:-:9000}
ADMIN=${ADMIN:-127.0.0.1:9901}
UPSTREAM=${UPSTREAM:-127.0.0.1:8081}
for port in "${LISTEN##*:}" "${ADMIN##*:}" "${UPSTREAM##*:}"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "port $port is already in use (another 'make run'?); stop it or set LISTEN/ADMIN/UPSTREAM"
	fi
done

pids=()
cleanup() {
	trap - INT TERM EXIT
	say "stopping"
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT

mkdir -p .run
bin/demo-upstream --listen "$UPSTREAM" --name demo >.run/upstream.log 2>&1 &
pids+=($!)
bin/sluice-gateway --rules "$RULES" --listen "$LISTEN" --admin "$ADMIN" 2> >(tee .run/gateway.log >&2) &
pids+=($!)

for _ in $(seq 50); do
	curl -fsS "http://$ADMIN/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fsS "http://$ADMIN/readyz" >/dev/null 2>&1 || die "the gateway did not become ready; see .run/gateway.log"

port=${LISTEN##*:}
cat <<EOT

  Sluice is running.
    gateway      http://127.0.0.1:$port       (rules: $RULES, edit it and the gateway reloads)
    node admin   http://$ADMIN/status  /metrics  /healthz  /readyz
    upstream     http://$UPSTREAM

  See a 429 (orders allows 5/s per client IP, burst 10):
    for i in \$(seq 15); do curl -s -o /dev/null -w '%{http_code}\n' http://127.0.0.1:$port/api/orders; done
    curl -si http://127.0.0.1:$port/api/orders      # after the loop: headers and problem+json body

  Press Ctrl-C to stop.
EOT
wait -n "${pids[@]}" || true
die "a process exited; see .run/*.log"
