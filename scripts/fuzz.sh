#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, tests/fuzz/fuzz_*.c) and
# runs each for a fixed time on its committed corpus (tests/fuzz/corpus/NAME).
# A crash, leak, sanitizer report or timeout fails the script.
#   scripts/fuzz.sh                 every target, LMQ_FUZZ_SECONDS (default 60) each
#   scripts/fuzz.sh TARGET...       only these (fuzz_gguf, ...)
#   scripts/fuzz.sh --grow          first seed the corpora from the real files in
#                                   ../shared (GGUFs, containers converted from the
#                                   models, tokenizer files, templates), fuzz,
#                                   then minimise back into tests/fuzz/corpus
# New inputs found during a plain run go to build-fuzz/new/NAME, not into the
# committed corpus. Prints executions and corpus size per target. Corpus
# files above LMQ_FUZZ_MAX_FILE bytes (256 KiB) are not kept by --grow.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
secs=${LMQ_FUZZ_SECONDS:-60}
out=${LMQ_FUZZ_BUILD:-build-fuzz}
shared=${LMQ_SHARED:-$src/../shared}
grow=0
targets=()
for a in "$@"; do
  case $a in
    --grow) grow=1 ;;
    fuzz_*) targets+=("$a") ;;
    *) echo "usage: scripts/fuzz.sh [--grow] [fuzz_TARGET...]" >&2; exit 2 ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
fi
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/setup.sh installs it)" >&2; exit 1; }

CC=clang cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLMQ_SANITIZE=ON \
  -DLMQ_BUILD_FUZZERS=ON >/dev/null
cmake --build "$out" -j"$(nproc)" --target "${targets[@]}" >/dev/null

# seed NAME DIR: real inputs for target NAME (only with --grow)
seed() {
  local t=$1 d=$2 f i=0
  case $t in
    fuzz_gguf)
      # the header, metadata and tensor directory are in the first bytes
      for f in "$shared"/reference/*.gguf "$shared"/tokenizer-vectors/*.gguf; do
        if [ -f "$f" ]; then head -c 65536 "$f" >"$d/$(basename "$f")"; fi
      done ;;
    fuzz_container)
      local lmq="$out/lmq"
      cmake --build "$out" --target lmq >/dev/null
      for f in "$shared"/reference/stories260K-q4_k_m.gguf; do
        [ -f "$f" ] || continue
        "$lmq" convert "$f" -o "$d/$(basename "$f" .gguf).lmq" >/dev/null 2>&1 || true
        "$lmq" convert "$f" -o "$d/$(basename "$f" .gguf)-zstd.lmq" --compress zstd >/dev/null 2>&1 || true
      done ;;
    fuzz_hf_config)
      for f in "$shared"/models/*/config.json "$shared"/models/zoo/*/config.json; do
        if [ -f "$f" ]; then cp "$f" "$d/config-$((i++)).json"; fi
      done ;;
    fuzz_tokenizer_json)
      for f in "$shared"/models/*/tokenizer.json "$shared"/tokenizers/*/tokenizer.json "$shared"/models/zoo/*/tokenizer.json; do
        if [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 4000000 ]; then cp "$f" "$d/tokenizer-$((i++)).json"; fi
      done ;;
    fuzz_spm_model)
      for f in "$shared"/models/*/tokenizer.model "$shared"/tokenizers/*/tokenizer.model; do
        if [ -f "$f" ]; then cp "$f" "$d/tokenizer-$((i++)).model"; fi
      done ;;
    fuzz_jinja)
      for f in "$shared"/chat-templates/templates/*.jinja; do
        if [ -f "$f" ]; then cp "$f" "$d/$(basename "$f")"; fi
      done ;;
    fuzz_tokenizer_config)
      for f in "$shared"/models/*/tokenizer_config.json "$shared"/tokenizers/*/tokenizer_config.json "$shared"/models/zoo/*/tokenizer_config.json; do
        if [ -f "$f" ]; then cp "$f" "$d/tokenizer_config-$((i++)).json"; fi
      done ;;
  esac
  return 0
}

status=0
summary=()
for t in "${targets[@]}"; do
  corpus=tests/fuzz/corpus/$t
  mkdir -p "$corpus"
  new="$out/new/$t"
  rm -rf "$new"; mkdir -p "$new"
  if [ $grow = 1 ]; then
    seeds="$out/seeds/$t"; rm -rf "$seeds"; mkdir -p "$seeds"
    seed "$t" "$seeds"
    cp -n "$seeds"/* "$new"/ 2>/dev/null || true
  fi
  log="$out/$t.log"
  echo "== $t: ${secs}s"
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "$out/tests/$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -max_len=1048576 \
      -print_final_stats=1 -artifact_prefix="$out/$t-" "$new" "$corpus" >"$log" 2>&1; then
    echo "FAIL: $t (log: $log)"; tail -40 "$log"; status=1
  fi
  if [ $grow = 1 ]; then
    # minimise everything seen (committed + seeds + new) into the committed corpus
    merged="$out/merged/$t"; rm -rf "$merged"; mkdir -p "$merged"
    "$out/tests/$t" -merge=1 -max_len=1048576 "$merged" "$corpus" "$new" >>"$log" 2>&1 || status=1
    # keep the committed corpora small: no file above LMQ_FUZZ_MAX_FILE bytes
    find "$merged" -type f -size +"${LMQ_FUZZ_MAX_FILE:-262144}"c -delete
    rm -rf "$corpus"; mkdir -p "$corpus"; cp "$merged"/* "$corpus"/ 2>/dev/null || true
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  summary+=("$(printf '%-24s %10s execs  corpus %4d files %6s' "$t" "${execs:-?}" \
    "$(ls "$corpus" | wc -l)" "$(( $(du -sb "$corpus" | cut -f1) / 1024 ))K")")
done
echo "== fuzz summary (${secs}s per target)"
printf '   %s\n' "${summary[@]}"
exit $status
