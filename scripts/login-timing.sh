#!/bin/bash
# Alternating failed logins for a missing and an existing user against a
# running sluice-admin (started with --trusted-proxies 127.0.0.1/32, so that
# each try comes from its own X-Forwarded-For address and the login throttle
# stays out of the way); prints the median time of each, in ms.
#   scripts/login-timing.sh [URL] [TRIES] [EXISTING-USER]
URL=${1:-http://127.0.0.1:8080}; N=${2:-31}; USER_NAME=${3:-admin}
m=(); e=()
t() { curl -s -o /dev/null -w '%{time_total}' -H "X-Forwarded-For: 198.51.100.$1" -H 'Content-Type: application/json' -d "{\"username\":\"$2\",\"password\":\"wrong password\"}" "$URL/api/v1/auth/login"; }
for i in $(seq $N); do
  if ((i % 2)); then m+=($(t $i nobody)); e+=($(t $((i+100)) "$USER_NAME")); else e+=($(t $((i+100)) "$USER_NAME")); m+=($(t $i nobody)); fi
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]*1000}'; }
echo "missing $(med "${m[@]}") ms, existing $(med "${e[@]}") ms (median of $N each)"
