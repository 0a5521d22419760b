#!/usr/bin/env bash
# lmq quantize end to end: usage errors (unknown type with the valid list,
# bad regex, bad override type: exit 2), refusals (quantized input, NaN
# weights, output over input: exit 1, nothing left behind), --dry-run (plan
# printed, nothing written), --json, GGUF and Hugging Face directory inputs.
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_quantize.XXXXXX")
trap 'rm -rf "$T"' EXIT
REF="$LMQ_SHARED/reference"
# nothing but the named files in $T (no partial outputs, no temporaries)
only() { [ "$(echo $(ls -A "$T" | sort))" = "$*" ]; }

# ---- usage
out=$("$LMQ" quantize --help 2>&1); rc=$?
check "quantize --help exits 0" "[ $rc -eq 0 ] && grep -q usage <<<\"\$out\""
out=$("$LMQ" quantize --list 2>&1); rc=$?
check "--list shows the mixes" "[ $rc -eq 0 ] && grep -q q4_k_m <<<\"\$out\" && grep -q iq4_xs <<<\"\$out\""
"$LMQ" quantize >/dev/null 2>&1; rc=$?
check "no arguments exits 2" "[ $rc -eq 2 ]"
err=$("$LMQ" quantize in.lmq out.lmq --type q4_k_z 2>&1); rc=$?
check "unknown type exits 2 listing the valid ones ($err)" \
  "[ $rc -eq 2 ] && grep -q q4_k_z <<<\"\$err\" && grep -q 'q4_k_m' <<<\"\$err\" && grep -q 'q2_k' <<<\"\$err\""
err=$("$LMQ" quantize in.lmq out.lmq 2>&1); rc=$?
check "missing type exits 2" "[ $rc -eq 2 ] && grep -q q4_k_m <<<\"\$err\""
err=$("$LMQ" quantize in.lmq out.lmq --type q4_k_m --tensor-type 'attn_(q=q8_0' 2>&1); rc=$?
check "bad regex exits 2 naming it ($err)" "[ $rc -eq 2 ] && grep -q 'attn_(q' <<<\"\$err\""
err=$("$LMQ" quantize in.lmq out.lmq --type q4_k_m --tensor-type 'attn_q=q9_9' 2>&1); rc=$?
check "unknown override type exits 2" "[ $rc -eq 2 ] && grep -q q9_9 <<<\"\$err\""
err=$("$LMQ" quantize in.lmq out.lmq --type q4_k_m --tensor-type 'attn_q' 2>&1); rc=$?
check "override without =TYPE exits 2" "[ $rc -eq 2 ]"
err=$("$LMQ" quantize in.lmq out.lmq --type q4_k_m -t 0 2>&1); rc=$?
check "-t 0 exits 2" "[ $rc -eq 2 ]"
err=$("$LMQ" quantize "$T/missing.lmq" "$T/o.lmq" --type q4_k_m 2>&1); rc=$?
check "missing input exits 1 naming it" "[ $rc -eq 1 ] && grep -q missing.lmq <<<\"\$err\""
check "nothing written after usage errors" "only"

SRC="$REF/stories260K-f32.gguf"
if [ ! -f "$SRC" ]; then
  echo "SKIP: $REF not found (set LMQ_SHARED)"; echo "$pass passed, $fail failed"; exit 77
fi

# ---- dry run: the plan, nothing written
out=$("$LMQ" quantize "$SRC" "$T/dry.lmq" --type q4_k_m --dry-run 2>"$T/err"); rc=$?
check "dry run exits 0 ($(head -c 300 "$T/err"))" "[ $rc -eq 0 ]"
check "dry run: tied token_embd in q8_0" "grep -Eq '^token_embd.weight +64 x 512 +f32 +q8_0' <<<\"\$out\""
check "dry run: 172-wide ffn_down falls back to f16" "grep -Eq '^blk.0.ffn_down.weight .* f16 .*q4_K does not fit' <<<\"\$out\""
check "dry run: summary with bpw" "grep -q 'bpw' <<<\"\$out\""
check "dry run writes nothing" "only err"
json=$("$LMQ" quantize "$SRC" --type q4_k_m --dry-run --json 2>/dev/null); rc=$?
check "dry run --json without OUT" "[ $rc -eq 0 ] && /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); \
assert d[\"mix\"]==\"q4_k_m\" and len(d[\"tensors\"])==47 and d[\"n_tensors\"]==47 and d[\"bpw\"]>4' <<<\"\$json\""
err=$("$LMQ" quantize "$SRC" --type q4_k_m --dry-run --tensor-type 'no_such_tensor=q8_0' 2>&1 >/dev/null); rc=$?
check "unmatched pattern: a warning, exit 0" "[ $rc -eq 0 ] && grep -q 'no_such_tensor' <<<\"\$err\" && grep -q warning <<<\"\$err\""

# ---- quantize (GGUF input), overrides, summary
err=$("$LMQ" quantize "$SRC" "$T/q.lmq" --type q4_k_m --tensor-type 'attn_q=q8_0' -t 2 2>&1); rc=$?
check "quantize exits 0 ($err)" "[ $rc -eq 0 ] && [ -s \"$T/q.lmq\" ]"
check "summary line: tensors, sizes, bpw, seconds" "grep -q 'tensors' <<<\"\$err\" && grep -q bpw <<<\"\$err\" && grep -q ' s' <<<\"\$err\""
json=$("$LMQ" quantize "$SRC" "$T/p.lmq" q8_0 --pure --json 2>/dev/null); rc=$?
check "positional type, --pure, --json summary" "[ $rc -eq 0 ] && /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); \
assert d[\"mix\"]==\"q8_0\" and d[\"n_tensors\"]==47 and d[\"file_bytes\"]>0' <<<\"\$json\""
rm -f "$T/p.lmq" "$T/err"

# ---- refusals: exit 1, nothing left behind
err=$("$LMQ" quantize "$T/q.lmq" "$T/qq.lmq" --type q8_0 2>&1); rc=$?
check "quantized input refused ($err)" "[ $rc -eq 1 ] && grep -q 'already quantized' <<<\"\$err\""
check "no output after the refusal" "only q.lmq"
err=$("$LMQ" quantize "$T/q.lmq" "$T/deq.lmq" --type f16 2>&1); rc=$?
check "quantized input to f16 (dequantize) works ($err)" "[ $rc -eq 0 ] && [ -s \"$T/deq.lmq\" ]"
rm -f "$T/deq.lmq"
err=$("$LMQ" quantize "$T/q.lmq" "$T/q.lmq" --type f16 2>&1); rc=$?
check "output over input refused" "[ $rc -eq 1 ] && only q.lmq"

# NaN in the last tensor's data (the file ends with it; f32 is 4-aligned)
cp "$SRC" "$T/nan.gguf"
size=$(stat -c %s "$T/nan.gguf")
printf '\x00\x00\xc0\x7f' | dd of="$T/nan.gguf" bs=1 seek=$((size - 64)) conv=notrunc 2>/dev/null
err=$("$LMQ" quantize "$T/nan.gguf" "$T/nan.lmq" --type q4_k_m 2>&1); rc=$?
check "NaN weight refused naming the tensor ($err)" "[ $rc -eq 1 ] && grep -q 'non-finite' <<<\"\$err\" && grep -q 'weight' <<<\"\$err\""
check "no output after the NaN refusal" "only nan.gguf q.lmq"

# ---- Hugging Face directory in, converted on the fly
HF="$LMQ_SHARED/models/stories260K-hf"
err=$("$LMQ" quantize "$HF" "$T/hf.lmq" --type q4_k_m 2>&1); rc=$?
check "HF directory input ($(head -c 300 <<<"$err"))" "[ $rc -eq 0 ] && [ -s \"$T/hf.lmq\" ]"
check "no temporary left from the HF conversion" "only hf.lmq nan.gguf q.lmq"
out=$("$LMQ" quantize "$HF" --type q2_k --dry-run 2>&1); rc=$?
check "HF directory dry run" "[ $rc -eq 0 ] && grep -Eq '^blk.0.attn_v.weight .* iq4_nl' <<<\"\$out\""

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
