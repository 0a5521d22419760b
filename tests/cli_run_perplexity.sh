#!/usr/bin/env bash
# lmq run and lmq perplexity end to end on stories260K: greedy text equals the
# reference, --seed reproduces a sampled run, --stop cuts the text, context
# overflow ends cleanly, the stats line; perplexity --json fields, chunking
# counts, a too-short text and a KLD file of another vocabulary refused with
# one line naming the file; usage errors exit 2, bad files exit 1.
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
: "${LMQ:?LMQ must name the lmq binary}"
ST=$LMQ_SHARED/models/stories260K-hf
M8=$LMQ_SHARED/models/llama-8m-debtext
WIKI=$LMQ_SHARED/data/wikitext-2-raw/wiki.test.raw
if [ ! -d "$ST" ] || [ ! -f "$WIKI" ]; then echo "SKIP: $ST or $WIKI missing (set LMQ_SHARED)"; exit 77; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_run.XXXXXX"); trap 'rm -rf "$T"' EXIT
export LMQ_NO_PROGRESS=1
"$LMQ" convert "$ST" -o "$T/st.lmq" >/dev/null 2>&1 || { echo "FAIL: convert"; exit 1; }
"$LMQ" convert "$M8" -o "$T/m8.lmq" >/dev/null 2>&1 || { echo "FAIL: convert"; exit 1; }

# ---- run
want=$(printf '%b' "$(tr -d '\n' < "$ST/reference_greedy.json" | grep -o '"greedy_text": *"[^"]*"' | sed 's/.*: *"//; s/"$//')")
got=$("$LMQ" run -m "$T/st.lmq" -p "Once upon a time" -n 60 --temp 0 2>"$T/err")
check "greedy text equals reference_greedy.json's greedy_text" "[ -n \"\$want\" ] && [ \"\$got\" = \"\$want\" ]"
check "stats line: load, prompt and generated tok/s" "grep -q 'load .* ms | prompt 5 tokens, .* tok/s | generated 60 tokens, .* tok/s' '$T/err'"
a=$("$LMQ" run -m "$T/st.lmq" -p "Once upon a time" -n 30 --temp 0.9 --seed 7 2>/dev/null)
b=$("$LMQ" run -m "$T/st.lmq" -p "Once upon a time" -n 30 --temp 0.9 --seed 7 -t 1 2>/dev/null)
c=$("$LMQ" run -m "$T/st.lmq" -p "Once upon a time" -n 30 --temp 0.9 --seed 8 2>/dev/null)
check "--seed reproduces a sampled run (1 and 2 threads)" "[ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]"
check "another seed samples another text" "[ \"\$a\" != \"\$c\" ]"
got=$("$LMQ" run -m "$T/st.lmq" -p "Once upon a time" -n 60 --temp 0 --stop "Lily" 2>/dev/null)
check "--stop ends before the stop string" "[ \"\$got\" = 'Once upon a time, there was a little girl named ' ]"
"$LMQ" run -m "$T/st.lmq" -p "Once upon a time" -n 600 -c 64 --temp 0 >/dev/null 2>"$T/err"; rc=$?
check "context overflow stops cleanly (exit 0, says so)" "[ $rc -eq 0 ] && grep -q 'context full' '$T/err'"
long=$(printf 'Once upon a time %.0s' $(seq 1 40))
err=$("$LMQ" run -m "$T/st.lmq" -p "$long" -c 32 2>&1 >/dev/null); rc=$?
check "a prompt longer than the context exits 1 with a clear line" "[ $rc -eq 1 ] && grep -q 'does not fit in the context' <<<\"\$err\""
err=$("$LMQ" run -m "$T/none.lmq" -p x 2>&1); rc=$?
check "missing model exits 1 naming it" "[ $rc -eq 1 ] && grep -q none.lmq <<<\"\$err\""
head -c 1000 "$T/st.lmq" > "$T/trunc.lmq"
err=$("$LMQ" run -m "$T/trunc.lmq" -p x 2>&1); rc=$?
check "truncated model exits 1 naming it" "[ $rc -eq 1 ] && grep -q trunc.lmq <<<\"\$err\""
for bad in "--temp -1" "--top-p 2" "-n x" "--frob" "--seed"; do
  "$LMQ" run -m "$T/st.lmq" -p x $bad >/dev/null 2>&1; rc=$?
  check "run $bad exits 2" "[ $rc -eq 2 ]"
done

# ---- perplexity
out=$("$LMQ" perplexity -m "$T/st.lmq" -f "$WIKI" -c 128 --chunks 5 -t 2 --json 2>/dev/null); rc=$?
check "perplexity --json exits 0" "[ $rc -eq 0 ]"
check "--json has ppl, stderr, chunks 5, 5*63 scored tokens" \
  "grep -q '\"chunks\": 5' <<<\"\$out\" && grep -q '\"tokens_scored\": 315' <<<\"\$out\" && grep -q '\"ppl\": [0-9]' <<<\"\$out\" && grep -q '\"stderr\": [0-9]' <<<\"\$out\""
txt=$("$LMQ" perplexity -m "$T/st.lmq" -f "$WIKI" -c 128 --chunks 5 -t 1 2>/dev/null)
p1=$(sed -n 's/.*"ppl": *\([0-9.]*\).*/\1/p' <<<"$out")
p1=$(printf '%.4f' "$p1") # the text prints 4 decimals, rounded (not cut)
check "text output ends with PPL = X +/- Y, same PPL as --json (1 vs 2 threads)" "[ -n \"$p1\" ] && grep -q \"PPL = \$p1 \" <<<\"\$txt\""
printf 'a short text\n' > "$T/short.txt"
err=$("$LMQ" perplexity -m "$T/st.lmq" -f "$T/short.txt" -c 128 2>&1); rc=$?
check "a text shorter than 2*c exits 1 saying so" "[ $rc -eq 1 ] && grep -q '2\*c' <<<\"\$err\""
"$LMQ" perplexity -m "$T/m8.lmq" -f "$WIKI" -c 64 --chunks 4 --save-logits "$T/m8.logits" >/dev/null 2>&1; rc=$?
check "--save-logits exits 0 and writes the file" "[ $rc -eq 0 ] && [ -s '$T/m8.logits' ]"
err=$("$LMQ" perplexity -m "$T/st.lmq" -f "$WIKI" -c 64 --chunks 4 --kl-divergence "$T/m8.logits" 2>&1); rc=$?
check "KLD against another model's logits exits 1 naming the file" "[ $rc -eq 1 ] && grep -q 'm8.logits' <<<\"\$err\" && grep -q vocabulary <<<\"\$err\""
out=$("$LMQ" perplexity -m "$T/m8.lmq" -f "$WIKI" -c 64 --chunks 4 --kl-divergence "$T/m8.logits" --json 2>/dev/null); rc=$?
check "KLD of a model against itself has 100% same top" "[ $rc -eq 0 ] && grep -q '\"same_top_pct\": 100.0000' <<<\"\$out\""
# kld_field JSON NAME: one number of the "kld" object
kld_field() { sed -n "s/.*\"kld\": {.*\"$2\": *\([-0-9.e+]*\).*/\1/p" <<<"$1"; }
# ~0: the saved logits round to 16 bits, measured mean 7e-8, max 1.4e-7, |ln ratio| 6e-5
self_zero() { awk -v m="$(kld_field "$1" mean)" -v x="$(kld_field "$1" max)" -v r="$(kld_field "$1" ln_ppl_ratio)" \
  'BEGIN { exit !(m != "" && x != "" && r != "" && m >= 0 && m < 1e-6 && x < 1e-5 && r < 5e-4 && -r < 5e-4) }'; }
check "KLD of a model against itself: mean, max and ln(PPL ratio) ~0 ($(kld_field "$out" mean), $(kld_field "$out" max))" "self_zero \"\$out\""
# the same check tells a different model apart (q4_0 of it: mean KLD ~6e-3)
"$LMQ" quantize "$T/m8.lmq" "$T/m8-q4_0.lmq" --type q4_0 >/dev/null 2>&1
outq=$("$LMQ" perplexity -m "$T/m8-q4_0.lmq" -f "$WIKI" -c 64 --chunks 4 --kl-divergence "$T/m8.logits" --json 2>/dev/null); rc=$?
check "KLD of q4_0 against f32 is not ~0 ($(kld_field "$outq" mean))" "[ $rc -eq 0 ] && ! self_zero \"\$outq\" && [ -n \"$(kld_field "$outq" mean)\" ]"
# --kv-type q8_0: a cache of 8-bit blocks (head size 32 here), perplexity close to f16's
p16=$("$LMQ" perplexity -m "$T/m8.lmq" -f "$WIKI" -c 128 --chunks 8 --json 2>/dev/null | sed -n 's/.*"ppl": *\([0-9.]*\).*/\1/p')
p8=$("$LMQ" perplexity -m "$T/m8.lmq" -f "$WIKI" -c 128 --chunks 8 --kv-type q8_0 --json 2>/dev/null | sed -n 's/.*"ppl": *\([0-9.]*\).*/\1/p')
check "--kv-type q8_0 perplexity within 1% of f16 ($p8 vs $p16)" \
  "awk -v a='$p8' -v b='$p16' 'BEGIN { exit !(a != \"\" && b != \"\" && a / b < 1.01 && b / a < 1.01) }'"
for cmd in "perplexity -f $WIKI" "run -p x" "bench -p 8 -n 0"; do
  err=$("$LMQ" $cmd -m "$T/m8.lmq" --kv-type q4_0 2>&1); rc=$?
  check "${cmd%% *} --kv-type q4_0 exits 2 with one line naming the choices" \
    "[ $rc -eq 2 ] && grep -q 'kv-type.*q4_0.*f16, f32 or q8_0' <<<\"\$err\""
done
err=$("$LMQ" run -m "$T/st.lmq" -p x -n 1 --kv-type q8_0 2>&1 >/dev/null); rc=$?
check "q8_0 cache with a head size not a multiple of 32 exits 1 saying so" "[ $rc -eq 1 ] && grep -q 'multiple of 32' <<<\"\$err\""
# the environment's kernel settings are the CLI's defaults (the library reads none)
out=$(LMQ_ISA=scalar "$LMQ" bench -m "$T/m8.lmq" -p 8 -n 0 -r 1 --json 2>/dev/null)
check "LMQ_ISA=scalar: bench runs the scalar kernels" "grep -q '\"isa\": \"scalar\"' <<<\"\$out\""
err=$(LMQ_ISA=bogus LMQ_GEMM=bogus "$LMQ" bench -m "$T/m8.lmq" -p 8 -n 0 -r 1 --json 2>&1 >/dev/null); rc=$?
check "unknown LMQ_ISA / LMQ_GEMM: one line each, the run goes on" \
  "[ $rc -eq 0 ] && grep -q 'LMQ_ISA=bogus is not a known ISA' <<<\"\$err\" &&
   grep -q 'LMQ_GEMM=bogus is not auto' <<<\"\$err\""
for bad in "-c 1" "--chunks x" "--frob" "-c"; do
  "$LMQ" perplexity -m "$T/st.lmq" -f "$WIKI" $bad >/dev/null 2>&1; rc=$?
  check "perplexity $bad exits 2" "[ $rc -eq 2 ]"
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
