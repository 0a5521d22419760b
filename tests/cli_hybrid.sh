#!/usr/bin/env bash
# Hybrid models (Qwen3.5: recurrent Gated DeltaNet layers, whose state
# cannot be rewound, beside attention) through the commands that reuse a
# cache, on ik_llama.cpp's q8_0 GGUFs of the zoo models:
#   - lmq chat: an edited last turn (/edit) gives the same conversation as
#     the same turns typed into a fresh session (the rewind restores a state
#     snapshot and re-evaluates from there);
#   - lmq serve with two slots: requests that share prefixes, in an order
#     that makes the slots reuse and rewind their caches, return exactly
#     lmq run's greedy texts for the same prompts;
#   - lmq info prints the layer kinds and the state memory.
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
: "${LMQ:?LMQ must name the lmq binary}"
REF=$LMQ_SHARED/reference/zoo
if [ ! -f "$REF/qwen35-q8_0.gguf" ]; then echo "SKIP: $REF/qwen35-q8_0.gguf missing"; exit 77; fi
for tool in expect node curl; do
  command -v $tool >/dev/null || { echo "FAIL: $tool not installed (scripts/setup.sh)"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_hybrid.XXXXXX")
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
. "$LMQ_SRC/tests/serve_lib.sh"
export LMQ_NO_PROGRESS=1
text_of() { node -e 'const d=JSON.parse(require("fs").readFileSync(0,"utf8"));process.stdout.write(d.choices[0].text)'; }

P1="The history of the city"
P2="The history of the language is"
P3="The history of the city of London and its river"
for name in qwen35 qwen35moe; do
  M=$REF/$name-q8_0.gguf
  # ---- info
  out=$("$LMQ" info "$M")
  check "$name: info prints the layer kinds and the state memory" \
    "grep -q 'recurrent (Gated DeltaNet), [0-9]* attention; state .* MB per sequence' <<<\"\$out\""

  # ---- chat: /edit against a fresh session
  tr=$(expect "$LMQ_SRC/tests/chat_edit.exp" "$LMQ" "$M" "$T/edit.json" "$T/fresh.json" 2>&1); rc=$?
  check "$name: chat session with /edit completes" "[ $rc -eq 0 ] && grep -q '^EXIT: 0' <<<\"\$tr\"" || echo "$tr"
  check "$name: the edited conversation equals the fresh one" \
    "[ -s '$T/edit.json' ] && cmp -s '$T/edit.json' '$T/fresh.json'"
  check "$name: the edit replaced the second question" \
    "grep -q 'mountains' '$T/edit.json' && ! grep -q 'the sea' '$T/edit.json'"

  # ---- serve: two slots, shared prefixes
  for i in 1 2 3; do
    eval "p=\$P$i"
    "$LMQ" run -m "$M" -p "$p" --no-echo --temp 0 -n 16 -c 512 -t 1 > "$T/want$i.txt" 2>/dev/null
  done
  serve_start "$T/serve.log" -m "$M" --parallel 2 -t 1 -c 512
  check "$name: the server started" "[ -n '$URL' ]" || cat "$T/serve.log"
  ok=0; n=0
  for i in 1 2 1 3 2 3 1; do
    eval "p=\$P$i"
    got=$(curl -s "$URL/v1/completions" -d "{\"prompt\":\"$p\",\"max_tokens\":16,\"temperature\":0}" | text_of)
    n=$((n+1))
    if [ "$got" = "$(cat "$T/want$i.txt")" ]; then ok=$((ok+1)); else echo "$name: prompt $i: got '$got' want '$(cat "$T/want$i.txt")'"; fi
  done
  check "$name: $n requests over two reused slots give lmq run's texts ($ok equal)" "[ $ok -eq $n ]"
  check "$name: the server logged no crash" "! grep -qi 'sanitizer\|segmentation\|abort' '$T/serve.log'"
  serve_stop; rc=$?
  check "$name: SIGINT: exit 0" "[ $rc -eq 0 ]"
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
