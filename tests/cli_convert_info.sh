#!/usr/bin/env bash
# lmq convert and lmq info end to end: exit codes (2 usage, 1 bad input),
# no partial output on failure, conversions of the real models, --verify on
# a corrupted copy naming the tensor, --json parseable, every GGUF in
# ../shared readable.
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
: "${LMQ:?LMQ must name the lmq binary}"
SHARED=${LMQ_SHARED:-$(dirname "$0")/../../shared}
if [ ! -d "$SHARED/models" ]; then echo "SKIP: real data not found at $SHARED (set LMQ_SHARED)"; exit 77; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/lmq-cli-convert.XXXXXX")
trap 'rm -rf "$T"' EXIT
export LMQ_NO_PROGRESS=1
M8=$SHARED/models/llama-8m-debtext
STORIES=$SHARED/models/stories260K-hf
PY=$(command -v python3 || true)
check "python3 is installed for the --json checks" "[ -n \"\$PY\" ]"
# no file named OUT or OUT.tmp.* left behind
nothing_at() { ! ls "$1"* >/dev/null 2>&1; }

# ---- usage errors: exit 2, one line naming the problem, nothing written
for args in "--type q4_0" "--type" "--compress lz4" "-t 0" "-t x" "--frobnicate" "--threads -2"; do
  err=$("$LMQ" convert "$M8" -o "$T/u.lmq" $args 2>&1 >/dev/null); rc=$?
  check "convert $args exits 2" "[ $rc -eq 2 ]"
  check "convert $args prints usage" "grep -q usage <<<\"\$err\""
  check "convert $args writes nothing" "nothing_at $T/u.lmq"
done
"$LMQ" convert "$M8" >/dev/null 2>&1; rc=$?
check "convert without -o exits 2" "[ $rc -eq 2 ]"
"$LMQ" convert -o "$T/u.lmq" >/dev/null 2>&1; rc=$?
check "convert without input exits 2" "[ $rc -eq 2 ]"
"$LMQ" convert "$M8" extra -o "$T/u.lmq" >/dev/null 2>&1; rc=$?
check "convert with two inputs exits 2" "[ $rc -eq 2 ]"
for args in "--frobnicate" "-t 0" "" "a b"; do
  "$LMQ" info $args >/dev/null 2>&1; rc=$?
  check "info '$args' exits 2" "[ $rc -eq 2 ]"
done
out=$("$LMQ" convert --help); rc=$?
check "convert --help exits 0" "[ $rc -eq 0 ] && grep -q -- --type <<<\"\$out\""
out=$("$LMQ" info --help); rc=$?
check "info --help exits 0" "[ $rc -eq 0 ] && grep -q -- --verify <<<\"\$out\""

# ---- bad input: exit 1, one line naming the path, no partial file
err=$("$LMQ" convert "$T/no-such-model" -o "$T/a.lmq" 2>&1); rc=$?
check "missing input exits 1" "[ $rc -eq 1 ]"
check "missing input is named" "grep -q no-such-model <<<\"\$err\" && [ \$(wc -l <<<\"\$err\") -eq 1 ]"
check "missing input leaves nothing" "nothing_at $T/a.lmq"
mkdir -p "$T/empty"
err=$("$LMQ" convert "$T/empty" -o "$T/b.lmq" 2>&1); rc=$?
check "directory without config.json exits 1" "[ $rc -eq 1 ] && grep -q config.json <<<\"\$err\""
check "directory without config.json leaves nothing" "nothing_at $T/b.lmq"
err=$("$LMQ" convert "$M8" -o "$T/no/such/dir/c.lmq" 2>&1); rc=$?
check "unwritable output exits 1" "[ $rc -eq 1 ] && grep -q 'no/such/dir/c.lmq' <<<\"\$err\""
# a model whose weights are cut short: fails while reading, no output left
mkdir -p "$T/cut"
cp "$STORIES"/*.json "$STORIES"/tokenizer.model "$T/cut/"
head -c 500000 "$STORIES/model.safetensors" >"$T/cut/model.safetensors"
err=$("$LMQ" convert "$T/cut" -o "$T/d.lmq" 2>&1); rc=$?
check "truncated safetensors exits 1" "[ $rc -eq 1 ] && grep -q model.safetensors <<<\"\$err\""
check "truncated safetensors leaves nothing" "nothing_at $T/d.lmq"
err=$("$LMQ" info "$T/nope.lmq" 2>&1); rc=$?
check "info on a missing file exits 1" "[ $rc -eq 1 ] && grep -q nope.lmq <<<\"\$err\""
err=$("$LMQ" info "$M8/config.json" 2>&1); rc=$?
check "info on a non-model file exits 1" "[ $rc -eq 1 ] && grep -q config.json <<<\"\$err\""

# ---- conversions of the real models
"$LMQ" convert "$M8" -o "$T/m8-bf16.lmq" --type bf16 -t 2 2>"$T/log"; rc=$?
check "convert f32 -> bf16 exits 0" "[ $rc -eq 0 ] && [ -s $T/m8-bf16.lmq ]"
check "convert prints a summary" "grep -q '75 tensors' $T/log && grep -q 'peak RSS' $T/log"
check "no temporary left" "! ls $T/m8-bf16.lmq.tmp.* >/dev/null 2>&1"
out=$("$LMQ" info "$T/m8-bf16.lmq"); rc=$?
check "info exits 0" "[ $rc -eq 0 ]"
check "info shows the architecture" "grep -q 'architecture  llama' <<<\"\$out\""
check "info shows the hyper-parameters" "grep -Eq 'block_count +8' <<<\"\$out\" && grep -Eq 'head_count_kv +4' <<<\"\$out\""
check "info shows per-type counts" "grep -q 'f32 17' <<<\"\$out\" && grep -q 'bf16 58' <<<\"\$out\""
check "info shows parameters and bpw" "grep -q 'parameters    8.393 M' <<<\"\$out\" && grep -q 'bits per weight' <<<\"\$out\""
check "info shows provenance" "grep -q 'lmq.rope.layout' <<<\"\$out\" && grep -q 'model.safetensors' <<<\"\$out\""
out=$("$LMQ" info "$T/m8-bf16.lmq" --tensors); rc=$?
check "info --tensors lists 75 tensors" "[ $rc -eq 0 ] && [ \$(grep -Ec '^ +[0-9]+  ' <<<\"\$out\") -eq 75 ]"
check "info --tensors shows shapes" "grep -Eq 'blk.0.attn_k.weight +bf16 +256 x 128 ' <<<\"\$out\""
out=$("$LMQ" info "$T/m8-bf16.lmq" --verify -t 2); rc=$?
check "verify passes" "[ $rc -eq 0 ] && grep -q 'all 75 checksums OK' <<<\"\$out\" && grep -q 'GB/s' <<<\"\$out\""

"$LMQ" convert "$M8" -o "$T/m8-zstd.lmq" --compress zstd 2>/dev/null; rc=$?
out=$("$LMQ" info "$T/m8-zstd.lmq" --verify); rc2=$?
check "zstd container converts and verifies" "[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && grep -q 'compression   zstd' <<<\"\$out\""
"$LMQ" convert "$STORIES" -o "$T/stories.lmq" 2>/dev/null; rc=$?
check "tied model converts" "[ $rc -eq 0 ]"
out=$("$LMQ" info "$T/stories.lmq" --tensors)
check "tied model has no output.weight" "! grep -q ' output.weight' <<<\"\$out\" && grep -Eq 'lmq.tie_word_embeddings +true' <<<\"\$out\""
"$LMQ" convert "$SHARED/reference/stories260K-f32.gguf" -o "$T/from-gguf.lmq" 2>/dev/null; rc=$?
check "GGUF input converts" "[ $rc -eq 0 ] && [ -s $T/from-gguf.lmq ]"

if [ -n "$PY" ]; then
  # --json is one parseable object with the documented fields
  "$LMQ" info "$T/m8-bf16.lmq" --json --tensors --verify >"$T/info.json"; rc=$?
  check "info --json exits 0" "[ $rc -eq 0 ]"
  check "info --json fields" "$PY - \"$T/info.json\" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j['kind'] == 'lmq' and j['architecture'] == 'llama' and j['n_tensors'] == 75
assert j['hparams']['block_count'] == 8 and j['types']['bf16']['count'] == 58
assert len(j['tensors']) == 75 and j['verify']['ok'] and j['verify']['n_checked'] == 75
assert j['lmq']['lmq.rope.layout'] == 'neox' and 'model.safetensors' in j['lmq']['lmq.source.files']
EOF"
  # flip one byte inside a tensor of a copy: --verify exits 1 naming that tensor
  for pick in 0 37 74; do
    cp "$T/m8-bf16.lmq" "$T/flip.lmq"
    name=$($PY - "$T/info.json" "$T/flip.lmq" $pick <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))['tensors'][int(sys.argv[3])]
at = t['offset'] + t['stored_bytes'] // 2
with open(sys.argv[2], 'r+b') as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 1]))
print(t['name'])
EOF
)
    err=$("$LMQ" info "$T/flip.lmq" --verify 2>&1 >/dev/null); rc=$?
    check "flipped byte in $name: exit 1" "[ $rc -eq 1 ]"
    check "flipped byte in $name: tensor named" "grep -q \"'$name'\" <<<\"\$err\""
  done
fi

# ---- every GGUF in ../shared: info (and --json) works
n=0
for g in "$SHARED"/tokenizer-vectors/*.gguf "$SHARED"/reference/*.gguf; do
  [ -f "$g" ] || continue
  n=$((n+1))
  out=$("$LMQ" info "$g" --tensors --verify 2>&1); rc=$?
  check "info $(basename "$g")" "[ $rc -eq 0 ] && grep -q 'format        GGUF' <<<\"\$out\" && grep -q 'tokenizer ' <<<\"\$out\""
  if [ -n "$PY" ]; then
    "$LMQ" info "$g" --json --meta >"$T/g.json"; rc=$?
    check "info --json $(basename "$g")" "[ $rc -eq 0 ] && $PY -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j[\"kind\"]==\"gguf\"' $T/g.json"
  fi
done
check "GGUF files found" "[ $n -ge 20 ]"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
