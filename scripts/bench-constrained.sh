#!/usr/bin/env bash
# Constrained-decoding cost of docs/SERVE.md: starts `lmq serve` on a free
# loopback port with one slot and runs scripts/bench-constrained.mjs (the
# same greedy prompt with and without response_format, alternated).
#   scripts/bench-constrained.sh MODEL.lmq [MAX_TOKENS=128] [ROUNDS=3] [LMQ=build/lmq] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: scripts/bench-constrained.sh MODEL.lmq [MAX_TOKENS] [ROUNDS] [LMQ] [THREADS]}
tok=${2:-128}; rounds=${3:-3}; lmq=${4:-build/lmq}; threads=${5:-}
log=$(mktemp); trap 'rm -f "$log"' EXIT
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
isa=avx2; grep -qw avx512f /proc/cpuinfo && isa=avx512
grep -qw avx512_vnni /proc/cpuinfo && isa="$isa (avx512_vnni)"
echo "CPU: $cpu; ISA: ${LMQ_ISA:-$isa (detected)}; model: $model"
"$lmq" serve -m "$model" --port 0 --parallel 1 -c 2048 ${threads:+-t "$threads"} 2>"$log" &
pid=$!
url=""
for _ in $(seq 1 600); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 || true)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.05
done
[ -n "$url" ] || { cat "$log"; kill "$pid" 2>/dev/null; exit 1; }
status=0
node scripts/bench-constrained.mjs "$url" "$tok" "$rounds" || status=$?
kill -INT "$pid"; wait "$pid" || true
exit $status
