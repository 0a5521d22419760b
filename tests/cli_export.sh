#!/usr/bin/env bash
# lmq export and lmq convert FILE.gguf: usage errors, GGUF -> .lmq -> GGUF
# identity on llama.cpp's own files, determinism, corrupted and truncated
# inputs (exit 1, the file named, nothing written).
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_export.XXXXXX")
trap 'rm -rf "$T"' EXIT
REF="$LMQ_SHARED/reference"

# ---- usage
out=$("$LMQ" export --help 2>&1); rc=$?
check "export --help exits 0" "[ $rc -eq 0 ] && grep -q usage <<<\"\$out\""
"$LMQ" export >/dev/null 2>&1; rc=$?
check "export without arguments exits 2" "[ $rc -eq 2 ]"
"$LMQ" export x.lmq >/dev/null 2>&1; rc=$?
check "export without -o exits 2" "[ $rc -eq 2 ]"
err=$("$LMQ" export x.lmq -o y.gguf --widen-fp8 f8 2>&1); rc=$?
check "bad --widen-fp8 value exits 2" "[ $rc -eq 2 ] && grep -q widen-fp8 <<<\"\$err\""
"$LMQ" export x.lmq -o y.gguf --alignment 48 >/dev/null 2>&1; rc=$?
check "alignment 48 exits 2" "[ $rc -eq 2 ]"
err=$("$LMQ" export "$T/missing.lmq" -o "$T/m.gguf" 2>&1); rc=$?
check "missing input exits 1 naming it" "[ $rc -eq 1 ] && grep -q missing.lmq <<<\"\$err\""

if [ ! -f "$REF/llama-8m-debtext-q4_k_m.gguf" ]; then
  echo "SKIP: $REF not found (set LMQ_SHARED)"; echo "$pass passed, $fail failed"; exit 77
fi

# ---- llama.cpp GGUF -> .lmq -> GGUF: the same bytes
for m in llama-8m-debtext-q4_k_m llama-8m-debtext-iq4_xs stories260K-f32; do
  "$LMQ" convert "$REF/$m.gguf" -o "$T/$m.lmq" >/dev/null 2>"$T/err"; rc=$?
  check "$m: convert from GGUF exits 0 ($(head -c 300 "$T/err"))" "[ $rc -eq 0 ]"
  "$LMQ" export "$T/$m.lmq" -o "$T/$m.gguf" >/dev/null 2>"$T/err"; rc=$?
  check "$m: export exits 0 ($(head -c 300 "$T/err"))" "[ $rc -eq 0 ]"
  check "$m: export of the import is llama.cpp's file byte for byte" "cmp -s \"$REF/$m.gguf\" \"$T/$m.gguf\""
done
"$LMQ" convert "$REF/stories260K-q4_k_m.gguf" -o "$T/z.lmq" --compress zstd >/dev/null 2>&1 &&
  "$LMQ" export "$T/z.lmq" -o "$T/z.gguf" >/dev/null 2>&1; rc=$?
check "zstd container exports to the same bytes" "[ $rc -eq 0 ] && cmp -s \"$REF/stories260K-q4_k_m.gguf\" \"$T/z.gguf\""

# ---- determinism
"$LMQ" export "$T/stories260K-f32.lmq" -o "$T/again.gguf" >/dev/null 2>&1
check "export twice gives identical bytes" "cmp -s \"$T/stories260K-f32.gguf\" \"$T/again.gguf\""

# ---- a corrupted container: exit 1, the tensor named, nothing written
cp "$T/stories260K-f32.lmq" "$T/bad.lmq"
b=$(od -An -tu1 -j 1000 -N 1 "$T/bad.lmq" | tr -d ' ')
printf "\\$(printf %o $(( (b + 1) % 256 )))" | dd of="$T/bad.lmq" bs=1 seek=1000 conv=notrunc 2>/dev/null
err=$("$LMQ" export "$T/bad.lmq" -o "$T/bad.gguf" 2>&1); rc=$?
check "corrupted container exits 1 with a checksum error ($err)" "[ $rc -eq 1 ] && grep -q checksum <<<\"\$err\" && grep -q weight <<<\"\$err\""
check "no output after a failed export" "[ ! -e \"$T/bad.gguf\" ] && ! ls \"$T\" | grep -q '[.]tmp[.]'"

# ---- truncated GGUF: exit 1, the file named, nothing written
head -c 5000 "$REF/stories260K-q4_k_m.gguf" >"$T/trunc.gguf"
err=$("$LMQ" convert "$T/trunc.gguf" -o "$T/trunc.lmq" 2>&1); rc=$?
check "truncated GGUF exits 1 naming the file ($err)" "[ $rc -eq 1 ] && grep -q trunc.gguf <<<\"\$err\""
check "no output after a failed convert" "[ ! -e \"$T/trunc.lmq\" ]"

# ---- the exported model computes what the container computes: perplexity of
# an HF-converted container (neox rows) and of its GGUF export (rows permuted,
# llama.cpp's pairing), and of llama.cpp's own GGUF of the same model
W="$LMQ_SHARED/data/wikitext-2-raw/wiki.test.raw"
HF="$LMQ_SHARED/models/stories260K-hf"
check "wikitext-2 and stories260K-hf are present" "[ -f \"$W\" ] && [ -d \"$HF\" ]"
if [ -f "$W" ] && [ -d "$HF" ]; then
  ppl() { "$LMQ" perplexity -m "$1" -f "$W" -c 256 --chunks 20 -t 2 --json 2>/dev/null |
          sed -n 's/.*"ppl": *\([0-9.]*\).*/\1/p'; }
  "$LMQ" convert "$HF" -o "$T/s.lmq" >/dev/null 2>&1 && "$LMQ" export "$T/s.lmq" -o "$T/s.gguf" >/dev/null 2>&1; rc=$?
  check "HF stories260K converts and exports" "[ $rc -eq 0 ]"
  a=$(ppl "$T/s.lmq"); b=$(ppl "$T/s.gguf"); c=$(ppl "$REF/stories260K-f32.gguf")
  close() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x > 0 && y > 0 && (x - y < 1e-3 * y) && (y - x < 1e-3 * y)) }'; }
  check "PPL of the neox container ($a) and of its export ($b) agree" "close \"$a\" \"$b\""
  check "PPL of the export ($b) equals llama.cpp's GGUF's ($c)" "[ -n \"$b\" ] && [ \"$b\" = \"$c\" ]"
fi

# ---- Qwen3.5 (hybrid Gated DeltaNet): HF -> .lmq -> GGUF with the tensor
# names and shapes of the reference GGUF (llama.cpp's converter); a layout
# llama.cpp cannot express is refused with one line
Z="$LMQ_SHARED/models/zoo"
ZR="$LMQ_SHARED/reference/zoo"
check "the qwen35 zoo models and references are present" "[ -d \"$Z/qwen35\" ] && [ -f \"$ZR/qwen35-q8_0.gguf\" ]"
if [ -d "$Z/qwen35" ] && [ -f "$ZR/qwen35-q8_0.gguf" ]; then
  shapes() { "$LMQ" info "$1" --tensors 2>/dev/null | awk '$1 ~ /^[0-9]+$/ { s = $2; for (i = 4; i <= NF - 2; i++) s = s " " $i; print s }' | sort; }
  for m in qwen35 qwen35moe; do
    "$LMQ" convert "$Z/$m" -o "$T/$m.lmq" --type f32 -t 2 >/dev/null 2>"$T/err" &&
      "$LMQ" export "$T/$m.lmq" -o "$T/$m.gguf" >/dev/null 2>>"$T/err"; rc=$?
    check "$m: converts and exports ($(head -c 300 "$T/err"))" "[ $rc -eq 0 ]"
    check "$m: the export has the reference's tensor names and shapes" \
      "[ -n \"\$(shapes \"$T/$m.gguf\")\" ] && [ \"\$(shapes \"$T/$m.gguf\")\" = \"\$(shapes \"$ZR/$m-q8_0.gguf\")\" ]"
  done
  mkdir -p "$T/q35i2"
  cp "$Z/qwen35/"* "$T/q35i2/"
  sed -i 's/"full_attention_interval": 4/"full_attention_interval": 2/' "$T/q35i2/config.json"
  "$LMQ" convert "$T/q35i2" -o "$T/q35i2.lmq" >/dev/null 2>&1; rc=$?
  check "qwen35 with layer_types against the interval converts" "[ $rc -eq 0 ]"
  err=$("$LMQ" export "$T/q35i2.lmq" -o "$T/q35i2.gguf" 2>&1); rc=$?
  check "... and export refuses it in one line ($err)" \
    "[ $rc -eq 1 ] && [ \$(wc -l <<<\"\$err\") -eq 1 ] && grep -q full_attention_interval <<<\"\$err\" && [ ! -e \"$T/q35i2.gguf\" ]"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
