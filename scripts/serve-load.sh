#!/usr/bin/env bash
# Load figures of docs/SERVE.md: starts `lmq serve` on a free loopback port
# with 1, 2 and 4 slots and runs scripts/serve-load.mjs against each (N
# clients x M streamed requests of MAX_TOKENS tokens). Bounded; stops by itself.
#   scripts/serve-load.sh MODEL.lmq [N=4] [M=8] [MAX_TOKENS=64] [LMQ=build/lmq] [THREADS]
# THREADS: -t of each slot (default: the server's, cores / slots).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: scripts/serve-load.sh MODEL.lmq [N] [M] [MAX_TOKENS] [LMQ]}
n=${2:-4}; m=${3:-8}; tok=${4:-64}; lmq=${5:-build/lmq}; threads=${6:-}
log=$(mktemp); trap 'rm -f "$log"' EXIT
for slots in 1 2 4; do
  "$lmq" serve -m "$model" --port 0 --parallel "$slots" -c 512 ${threads:+-t "$threads"} 2>"$log" &
  pid=$!
  url=""
  for _ in $(seq 1 300); do
    url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 || true)
    [ -n "$url" ] && break
    sleep 0.05
  done
  [ -n "$url" ] || { cat "$log"; kill "$pid"; exit 1; }
  printf 'slots=%d (%s) ' "$slots" "$(grep -o '[0-9]* thread[s]* each' "$log")"
  node scripts/serve-load.mjs "$url" "$n" "$m" "$tok" || true
  kill -INT "$pid"; wait "$pid" || true
done
