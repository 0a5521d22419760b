#!/usr/bin/env bash
# lmq tokenize end to end: the same ids from an HF directory, a converted
# .lmq and llama.cpp's GGUF of the same model, equal to the reference ids of
# reference_greedy.json; --no-bos, stdin, --pieces; a vocab-only GGUF;
# error paths (exit 1 naming the file, exit 2 for usage).
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
: "${LMQ:?LMQ must name the lmq binary}"
M8=$LMQ_SHARED/models/llama-8m-debtext
if [ ! -d "$M8" ]; then echo "SKIP: $M8 missing (set LMQ_SHARED)"; exit 77; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_tokenize.XXXXXX"); trap 'rm -rf "$T"' EXIT
export LMQ_NO_PROGRESS=1
"$LMQ" convert "$M8" -o "$T/m8.lmq" >/dev/null 2>&1 || { echo "FAIL: convert"; exit 1; }
# reference ids of the first prompt, as printed by --ids
flat=$(tr -d '\n' < "$M8/reference_greedy.json")
want=$(grep -o '"prompt_ids_with_bos": *\[[^]]*\]' <<<"$flat" | head -1 | sed 's/.*\[/[/; s/ //g')
prompt=$(grep -o '"prompt": *"[^"]*"' <<<"$flat" | head -1 | sed 's/.*: *"//; s/"$//')
[ -n "$want" ] && [ -n "$prompt" ] || { echo "FAIL: cannot read $M8/reference_greedy.json"; exit 1; }
for src in "$M8" "$T/m8.lmq" "$LMQ_SHARED/reference/llama-8m-debtext-f32.gguf"; do
  got=$("$LMQ" tokenize -m "$src" -p "$prompt" --ids | tr -d ' ')
  check "ids from $(basename "$src") equal the reference $want" "[ \"\$got\" = \"\$want\" ]"
done
got=$("$LMQ" tokenize -m "$T/m8.lmq" -p "$prompt" --no-bos | tr -d ' ')
check "--no-bos drops the leading BOS" "[ \"\$got\" = \"[\${want#[1,}\" ]"
got=$(printf '%s' "$prompt" | "$LMQ" tokenize -m "$T/m8.lmq" -f - | tr -d ' ')
check "stdin gives the same ids" "[ \"\$got\" = \"\$want\" ]"
n=$("$LMQ" tokenize -m "$T/m8.lmq" -p "$prompt" --pieces | wc -l)
check "--pieces prints one line per token" "[ $n -eq \$(tr ',' '\n' <<<\"\$want\" | wc -l) ]"
V=$LMQ_SHARED/tokenizer-vectors/ggml-vocab-llama-spm.gguf
check "$V is present" "[ -f \"$V\" ]"
if [ -f "$V" ]; then
  "$LMQ" tokenize -m "$V" -p "Hello world" >/dev/null 2>&1; rc=$?
  check "a vocab-only GGUF tokenizes" "[ $rc -eq 0 ]"
fi
err=$("$LMQ" tokenize -m "$T/none.lmq" -p x 2>&1); rc=$?
check "missing model exits 1 naming it" "[ $rc -eq 1 ] && grep -q none.lmq <<<\"\$err\""
"$LMQ" tokenize -m "$T/m8.lmq" >/dev/null 2>&1; rc=$?
check "no -p/-f exits 2" "[ $rc -eq 2 ]"
"$LMQ" tokenize -m "$T/m8.lmq" -p x --frob >/dev/null 2>&1; rc=$?
check "unknown flag exits 2" "[ $rc -eq 2 ]"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
