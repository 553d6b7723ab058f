#!/usr/bin/env bash
# make run: the whole stack on one machine, fresh each time —
#   Postgres (started or installed when needed), sluice-admin with an embedded
#   etcd, a seeded admin and approver, the demo namespace published from
#   deploy/rules/demo.yaml through the review workflow, a demo upstream and
#   two gateway nodes following etcd, and the SDK's example orders service
#   (a third kind of node: kind sdk) following its own namespace orders-svc,
#   whose kind: service rules (dataplane/sdk/example/orders/rules.yaml) are
#   published through the same review. The control plane signs what it
#   publishes with a key pair made once under .run/ (sluice-admin keygen);
#   the gateways and the service trust its public key. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

RULES=${RULES:-deploy/rules/demo.yaml}
SVC_RULES=dataplane/sdk/example/orders/rules.yaml
SVC_NS=orders-svc
SVC_HTTP=127.0.0.1:8090
SVC_GRPC=127.0.0.1:8091
DB=${SLUICE_DEMO_DB:-sluice_demo}
ADMIN_ADDR=127.0.0.1:8080
ETCD=127.0.0.1:2379
UPSTREAM=127.0.0.1:8081
GWS=("gw-1 9000 9901" "gw-2 9001 9902")

ensure_postgres
ensure_redis
ensure_pkg curl curl
for port in 8080 2379 2380 8081 8090 8091 9000 9001 9901 9902; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "port $port is already in use (another 'make run'?); stop whatever listens there and retry"
	fi
done

RUN=.run
rm -rf "$RUN/etcd" "$RUN/state" "$RUN/cookies-"*
mkdir -p "$RUN/state"
say "creating a fresh database $DB"
psql -h 127.0.0.1 -U postgres -qc "DROP DATABASE IF EXISTS $DB" >/dev/null
psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $DB" >/dev/null

ADMIN_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -d '/+=' | head -c 20)
REVIEWER_PASSWORD=$(head -c 18 /dev/urandom | base64 | tr -d '/+=' | head -c 20)
# The audit chain's HMAC key, which the database never sees; a new one with
# every fresh database.
AUDIT_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
umask 077
printf 'admin %s\nreviewer %s\n' "$ADMIN_PASSWORD" "$REVIEWER_PASSWORD" >"$RUN/credentials"
SIGNING_KEY=$RUN/signing.key
TRUST_KEYS=$RUN/signing.pub
if [ ! -f "$SIGNING_KEY" ] || [ ! -f "$TRUST_KEYS" ]; then
	rm -f "$SIGNING_KEY" "$TRUST_KEYS"
	say "generating the publication signing key pair ($SIGNING_KEY, $TRUST_KEYS)"
	bin/sluice-admin keygen --private "$SIGNING_KEY" --public "$TRUST_KEYS" >/dev/null
fi

pids=()
cleanup() {
	trap - INT TERM EXIT
	say "stopping"
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap 'cleanup; exit 0' INT TERM
trap cleanup EXIT

say "starting sluice-admin (embedded etcd at $ETCD)"
SLUICE_AUDIT_KEY=$AUDIT_KEY SLUICE_BOOTSTRAP_ADMIN_PASSWORD=$ADMIN_PASSWORD bin/sluice-admin \
	--database-url "postgres://postgres@127.0.0.1:5432/$DB?sslmode=disable" \
	--embedded-etcd "$RUN/etcd" --etcd-endpoints "$ETCD" --listen "$ADMIN_ADDR" \
	--signing-key "$SIGNING_KEY" --publish-poll-interval 500ms >"$RUN/admin.log" 2>&1 &
pids+=($!)
for _ in $(seq 150); do curl -fsS "http://$ADMIN_ADDR/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
curl -fsS "http://$ADMIN_ADDR/readyz" >/dev/null || die "sluice-admin did not become ready; see $RUN/admin.log"

# api METHOD PATH USER [BODY] [extra curl args...]: one authenticated call;
# prints the body, fails on a non-2xx status.
declare -A csrf
login() {
	local out
	out=$(curl -fsS -c "$RUN/cookies-$1" -H 'Content-Type: application/json' \
		-d "{\"username\":\"$1\",\"password\":\"$2\"}" "http://$ADMIN_ADDR/api/v1/auth/login") || die "login as $1 failed"
	csrf[$1]=$(grep -o '"csrfToken":"[^"]*"' <<<"$out" | cut -d'"' -f4)
}
api() {
	local method=$1 path=$2 user=$3 body=${4:-}
	shift 4 || shift $#
	local args=(-sS -b "$RUN/cookies-$user" -H "X-CSRF-Token: ${csrf[$user]}" -X "$method" -w '\n%{http_code}')
	[ -n "$body" ] && args+=(-H 'Content-Type: application/json' -d "$body")
	local out code
	out=$(curl "${args[@]}" "$@" "http://$ADMIN_ADDR$path")
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	[[ $code == 2* ]] || die "$method $path as $user: HTTP $code: $out"
	printf '%s' "$out"
}
# first_number NAME: the first "NAME":<number> in a JSON body (the top-level
# field of the objects this script reads: it precedes any nested one).
first_number() { grep -o "\"$1\":[0-9]*" | head -1 | cut -d: -f2; }

# publish NS FILE DESCRIPTION: creates namespace NS, stores FILE as its
# draft, and publishes it through review (admin proposes, reviewer approves
# and publishes); prints the published version's number.
publish() {
	local ns=$1 file=$2 desc=$3 etag change
	api POST /api/v1/namespaces admin "{\"name\":\"$ns\",\"description\":\"$desc\"}" >/dev/null
	etag=$(curl -fsS -D - -o /dev/null -b "$RUN/cookies-admin" "http://$ADMIN_ADDR/api/v1/namespaces/$ns/draft" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')
	curl -fsS -o /dev/null -b "$RUN/cookies-admin" -H "X-CSRF-Token: ${csrf[admin]}" -H "If-Match: $etag" \
		-H 'Content-Type: application/yaml' -X PUT --data-binary "@$file" "http://$ADMIN_ADDR/api/v1/namespaces/$ns/draft" ||
		die "could not store $file as the $ns draft"
	change=$(api POST "/api/v1/namespaces/$ns/changes" admin "{\"title\":\"$ns rules\",\"description\":\"seeded by make run\"}" | first_number id)
	api POST "/api/v1/namespaces/$ns/changes/$change/approve" reviewer '{"comment":"looks good"}' >/dev/null
	api POST "/api/v1/namespaces/$ns/changes/$change/publish" reviewer '{}' | first_number number
}

say "seeding: users, namespaces demo and $SVC_NS, and the reviewed publications of $RULES and $SVC_RULES"
login admin "$ADMIN_PASSWORD"
api POST /api/v1/users admin "{\"username\":\"reviewer\",\"password\":\"$REVIEWER_PASSWORD\",\"role\":\"approver\"}" >/dev/null
login reviewer "$REVIEWER_PASSWORD"
version=$(publish demo "$RULES" "make run demo")
svc_version=$(publish "$SVC_NS" "$SVC_RULES" "make run: the SDK example orders service")

say "starting the demo upstream (and identity provider) and two gateways"
# The demo upstream is also the demo's identity provider: it serves the
# public half of $RUN/demo-idp.key as the JWKS the demo rules' identity
# reads, and mints two sample tokens with it (alice on plan pro, bob on
# plan free).
IDP_KEY=$RUN/demo-idp.key
tokens=$(bin/demo-upstream --jwt-key "$IDP_KEY" --print-tokens) || die "could not mint the demo tokens"
ALICE_TOKEN=$(awk '$1 == "alice" {print $3}' <<<"$tokens")
BOB_TOKEN=$(awk '$1 == "bob" {print $3}' <<<"$tokens")
printf 'alice pro %s\nbob free %s\n' "$ALICE_TOKEN" "$BOB_TOKEN" >"$RUN/demo-tokens"
bin/demo-upstream --listen "$UPSTREAM" --name demo --jwt-key "$IDP_KEY" >"$RUN/upstream.log" 2>&1 &
pids+=($!)
for g in "${GWS[@]}"; do
	read -r id port admin <<<"$g"
	bin/sluice-gateway --etcd "$ETCD" --namespace demo --node-id "$id" --labels "zone=local,name=$id" --trust-keys "$TRUST_KEYS" \
		--state-dir "$RUN/state/$id" --listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" \
		--redis redis://127.0.0.1:6379 --redis-prefix "sluice-demo:" >"$RUN/$id.log" 2>&1 &
	pids+=($!)
done
say "starting the example orders service (in-service SDK, node orders-1 of $SVC_NS)"
bin/orders-example --etcd "$ETCD" --namespace "$SVC_NS" --node-id orders-1 --trust-keys "$TRUST_KEYS" \
	--state-dir "$RUN/state/orders-1" --listen "$SVC_HTTP" --grpc-listen "$SVC_GRPC" >"$RUN/orders-1.log" 2>&1 &
pids+=($!)
for g in "${GWS[@]}"; do
	read -r id port admin <<<"$g"
	for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
	curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null || die "$id did not become ready; see $RUN/$id.log"
done
# The service is ready when the control plane lists it running the
# published version (its registration, kind sdk).
svc_ready() {
	api GET "/api/v1/namespaces/$SVC_NS/nodes" admin | grep -q "\"nodeId\":\"orders-1\".*\"version\":${svc_version:-1}[,}]\|\"version\":${svc_version:-1}[,}].*\"nodeId\":\"orders-1\""
}
for _ in $(seq 100); do svc_ready && break; sleep 0.1; done
svc_ready || die "orders-1 did not register with version ${svc_version:-?} of $SVC_NS; see $RUN/orders-1.log"

cat <<EOT

  Sluice is running (version ${version:-?} of namespace demo is published to both gateways,
  version ${svc_version:-?} of namespace $SVC_NS to the example orders service, a node of kind sdk).

    console        http://$ADMIN_ADDR        admin / $ADMIN_PASSWORD     reviewer (approver) / $REVIEWER_PASSWORD
    gateways       http://127.0.0.1:9000 (gw-1)   http://127.0.0.1:9001 (gw-2)
    node admin     http://127.0.0.1:9901/status   http://127.0.0.1:9902/status   (/metrics /healthz /readyz)
    upstream       http://$UPSTREAM
    orders service http://$SVC_HTTP (HTTP)   $SVC_GRPC (gRPC)   in-service SDK, namespace $SVC_NS
    logs           $RUN/*.log   (credentials also in $RUN/credentials)

  See a 429 (orders allows 5/s per client IP, burst 10):
    for i in \$(seq 15); do curl -s -o /dev/null -w '%{http_code}\n' http://127.0.0.1:9000/api/orders; done
    curl -si http://127.0.0.1:9000/api/orders

  The service's own limits (kind: service rules: a per-IP limit on its route, and inside
  it a per-user limit on the queue publish, 5/s): the sixth order in a second is refused
  with a 429 naming publishes-per-user:
    for i in \$(seq 8); do curl -s -w ' %{http_code}\n' -X POST -H 'X-User: alice' http://$SVC_HTTP/api/orders; done
  Gateways and the service side by side in the console: Nodes of demo and of $SVC_NS.

  Verified identities (/api/account: per-user limit with pro/free tiers and a daily quota;
  tokens also in $RUN/demo-tokens, valid 30 days):
    ALICE=$ALICE_TOKEN
    BOB=$BOB_TOKEN
    curl -si http://127.0.0.1:9000/api/account                                   # no token: 401
    curl -si -H "Authorization: Bearer \$ALICE" http://127.0.0.1:9000/api/account  # pro: 10/s, and the pro quota (RateLimit-Policy q=1000 a day)
    for i in \$(seq 8); do curl -s -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer \$BOB" http://127.0.0.1:9000/api/account; done

  Which node runs what:
    curl -s http://127.0.0.1:9901/status                                      # one node, from itself
    curl -s -b $RUN/cookies-admin http://$ADMIN_ADDR/api/v1/namespaces/demo/nodes   # every node, from the control plane
    curl -s -b $RUN/cookies-admin http://$ADMIN_ADDR/api/v1/namespaces/$SVC_NS/nodes   # the service's (kind sdk)

  Press Ctrl-C to stop everything.
EOT
wait -n "${pids[@]}" || true
die "a process exited; see $RUN/*.log"
