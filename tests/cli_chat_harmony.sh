#!/usr/bin/env bash
# lmq chat with a harmony (gpt-oss) chat template, end to end on a real model.
# The models in ../shared have no harmony tokens, so the model never writes
# <|channel|>: its text reaches the splitter without headers and must come
# out unchanged as the final answer (docs/CHAT.md, "Harmony"). Checked here:
# the --reasoning flag (help, parsing, its notice on a non-harmony template,
# no change to a non-harmony reply), the harmony prompt, a piped reply equal
# to `lmq run` on the same prompt, and on a terminal /load and /save keeping
# an assistant message's `thinking`. The splitter itself: tests/test_harmony.c.
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
: "${LMQ:?LMQ must name the lmq binary}"
M8=$LMQ_SHARED/models/llama-8m-debtext
if [ ! -d "$M8" ]; then echo "SKIP: $M8 missing (set LMQ_SHARED)"; exit 77; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_chat_harmony.XXXXXX"); trap 'rm -rf "$T"' EXIT
export LMQ_NO_PROGRESS=1
"$LMQ" convert "$M8" -o "$T/m8.lmq" >/dev/null 2>&1 || { echo "FAIL: convert $M8"; exit 1; }
trim() { sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//'; }
GEN="-n 24 --temp 0 -c 512 -t 1"

# A harmony template in the shape of gpt-oss's (thinking as the analysis channel).
cat > "$T/harmony.jinja" <<'J'
{%- for m in messages %}<|start|>{{ m.role }}{% if m.role == 'assistant' %}{% if m.thinking %}<|channel|>analysis<|message|>{{ m.thinking }}<|end|><|start|>assistant{% endif %}<|channel|>final{% endif %}<|message|>{{ m.content }}<|end|>{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}
J

# ---- the flag
out=$("$LMQ" chat --help)
check "--help names --reasoning" "grep -q -- '--reasoning' <<<\"\$out\""
err=$(echo "Hello" | "$LMQ" chat -m "$T/m8.lmq" --reasoning=yes 2>&1); rc=$?
check "--reasoning takes no value (exit 2)" "[ $rc -eq 2 ]"

# ---- a non-harmony template: the reply is unchanged, one notice
a=$(echo "Hello, who are you?" | "$LMQ" chat -m "$T/m8.lmq" $GEN 2>/dev/null)
b=$(echo "Hello, who are you?" | "$LMQ" chat -m "$T/m8.lmq" $GEN --reasoning 2>"$T/err")
check "--reasoning leaves a non-harmony reply unchanged" "[ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]"
check "--reasoning on a non-harmony template says it has no effect (one line)" \
  "[ \$(grep -c 'has no effect' '$T/err') -eq 1 ]"
out=$(echo "Hi" | "$LMQ" chat -m "$T/m8.lmq" --reasoning --render 2>&1)
check "--render with --reasoning prints only the prompt" "[ \"\$out\" = '<s>[INST] Hi [/INST]' ]"

# ---- the harmony template: prompt, and a header-less reply shown as the answer
out=$(echo "Hello, who are you?" | "$LMQ" chat -m "$T/m8.lmq" --template "$T/harmony.jinja" --system "Be brief." --render)
check "the harmony prompt ends with <|start|>assistant" \
  "[ \"\$out\" = '<|start|>system<|message|>Be brief.<|end|><|start|>user<|message|>Hello, who are you?<|end|><|start|>assistant' ]"
echo "Hello, who are you?" | "$LMQ" chat -m "$T/m8.lmq" --template "$T/harmony.jinja" --render > "$T/prompt.txt"
h=$(echo "Hello, who are you?" | "$LMQ" chat -m "$T/m8.lmq" --template "$T/harmony.jinja" $GEN 2>"$T/err"); rc=$?
r=$("$LMQ" run -m "$T/m8.lmq" -f "$T/prompt.txt" --no-echo $GEN 2>/dev/null)
check "harmony chat exits 0 without a notice" "[ $rc -eq 0 ] && [ ! -s '$T/err' ]"
check "a reply without harmony headers is the answer, as lmq run generates it" \
  "[ -n \"\$(trim <<<\"\$h\")\" ] && [ \"\$(trim <<<\"\$h\")\" = \"\$(trim <<<\"\$r\")\" ]"
h2=$(echo "Hello, who are you?" | "$LMQ" chat -m "$T/m8.lmq" --template "$T/harmony.jinja" $GEN --reasoning 2>"$T/err")
check "--reasoning adds nothing when there is no reasoning" "[ \"\$h2\" = \"\$h\" ] && [ ! -s '$T/err' ]"

# ---- on a terminal: thinking survives /load and /save
check "expect is installed for the interactive test" "command -v expect >/dev/null"
if command -v expect >/dev/null; then
  cat > "$T/conv.json" <<'J'
[{"role":"user","content":"What is 2+2?"},{"role":"assistant","content":"4","thinking":"Simple arithmetic."},{"role":"user","content":"Thanks"}]
J
  echo '[{"role":"assistant","content":"x","thinking":7}]' > "$T/bad.json"
  tr=$(expect "$LMQ_SRC/tests/chat_harmony.exp" "$LMQ" "$T/m8.lmq" "$T/harmony.jinja" "$T/conv.json" "$T/saved.json" "$T/bad.json" 2>&1); rc=$?
  echo "$tr"
  check "interactive harmony session completes" "[ $rc -eq 0 ] && grep -q '^EXIT: 0' <<<\"\$tr\""
  r1=$(sed -n 's/^REPLY1: //p' <<<"$tr" | tr -d '\r')
  check "the interactive reply is shown, without a Thinking label" "[ -n \"\$r1\" ] && ! grep -q 'Thinking' <<<\"\$r1\""
  check "/save keeps the loaded thinking" "grep -qF '\"content\":\"4\",\"thinking\":\"Simple arithmetic.\"' '$T/saved.json'"
  check "/save records the new turn without a thinking field" \
    "python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); sys.exit(not (len(m)==5 and m[3]==dict(role=\"user\",content=\"And now?\") and m[4][\"role\"]==\"assistant\" and \"thinking\" not in m[4] and m[4][\"content\"]))' '$T/saved.json'"
else
  echo "FAIL: expect not installed (scripts/setup.sh installs it)"; fail=$((fail+1))
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
