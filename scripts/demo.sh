#!/usr/bin/env bash
# The main job on one model: build, convert a Hugging Face directory to .lmq,
# quantize it to q4_k_m, measure wikitext-2 perplexity of both, and chat once.
#   scripts/demo.sh [HF_DIR] [OUT_DIR]
# HF_DIR defaults to ../shared/models/llama-8m-debtext (or $LMQ_SHARED/models/...).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
shared="${LMQ_SHARED:-$root/../shared}"
[ -d "$shared/models" ] || [ ! -d /work/shared/models ] || shared=/work/shared
model="${1:-$shared/models/llama-8m-debtext}"
out="${2:-$root/build/demo}"
wiki="${LMQ_WIKITEXT:-$shared/data/wikitext-2-raw/wiki.test.raw}"
chunks="${LMQ_DEMO_CHUNKS:-300}"
[ -d "$model" ] || { echo "demo: model directory '$model' not found" >&2; exit 1; }

"$root/scripts/build.sh"
lmq="$root/build/lmq"
mkdir -p "$out"
name="$(basename "$model")"

echo "== convert $model"
"$lmq" convert "$model" -o "$out/$name-f32.lmq" --type f32
"$lmq" info "$out/$name-f32.lmq"

echo "== quantize to q4_k_m"
"$lmq" quantize "$out/$name-f32.lmq" "$out/$name-q4_k_m.lmq" --type q4_k_m
"$lmq" info "$out/$name-q4_k_m.lmq" --verify

echo "== perplexity on wikitext-2 (first $chunks chunks of 256 tokens)"
"$lmq" perplexity -m "$out/$name-f32.lmq" -f "$wiki" -c 256 --chunks "$chunks" --json | tee "$out/ppl-f32.json"
"$lmq" perplexity -m "$out/$name-q4_k_m.lmq" -f "$wiki" -c 256 --chunks "$chunks" --json | tee "$out/ppl-q4_k_m.json"

echo "== chat (one turn, non-interactive)"
echo "What is a package manager?" | "$lmq" chat -m "$out/$name-q4_k_m.lmq" -n 48 --temp 0

ppl() { sed -n 's/.*"ppl": *\([0-9.]*\).*"stderr": *\([0-9.]*\).*/\1 +\/- \2/p' "$1"; }
echo "== result: wikitext-2 perplexity (-c 256, $chunks chunks) of $name"
echo "f32:    $(ppl "$out/ppl-f32.json")"
echo "q4_k_m: $(ppl "$out/ppl-q4_k_m.json")"
