#!/usr/bin/env bash
# lmq chat with templates whose models write thought blocks (<think>, Gemma
# 4's <|channel>thought ... <channel|>), end to end on a real model that
# knows neither: a generation prompt that ends inside <think> makes the
# whole reply reasoning (shown after "Thinking: " with --reasoning, hidden
# without); a Gemma-4-shaped template is recognised (no "no effect"
# notice) and a reply without a block is all content. The splitter itself:
# tests/test_reasoning.c.
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
: "${LMQ:?LMQ must name the lmq binary}"
M8=$LMQ_SHARED/models/llama-8m-debtext
if [ ! -d "$M8" ]; then echo "SKIP: $M8 missing (set LMQ_SHARED)"; exit 77; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_chat_think.XXXXXX"); trap 'rm -rf "$T"' EXIT
export LMQ_NO_PROGRESS=1
"$LMQ" convert "$M8" -o "$T/m8.lmq" >/dev/null 2>&1 || { echo "FAIL: convert $M8"; exit 1; }
GEN="-n 24 --temp 0 -c 512 -t 1"

# Qwen3.5's shape: the generation prompt opens the block
cat > "$T/think.jinja" <<'J'
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
<think>
{% endif %}
J
r=$(echo "Once upon a time" | "$LMQ" chat -m "$T/m8.lmq" --template "$T/think.jinja" $GEN --reasoning 2>"$T/err")
check "--reasoning shows the open block's text after 'Thinking: '" "[[ \"\$r\" == 'Thinking: '?* ]]"
check "no 'no effect' notice for a <think> template" "! grep -q 'no effect' '$T/err'"
h=$(echo "Once upon a time" | "$LMQ" chat -m "$T/m8.lmq" --template "$T/think.jinja" $GEN 2>/dev/null)
check "without --reasoning the reasoning is not shown" "[ -z \"\$(tr -d '[:space:]' <<<\"\$h\")\" ]"

# Gemma 4's shape: the model writes the block itself; this one writes none
cat > "$T/gemma.jinja" <<'J'
{{- bos_token -}}{%- for m in messages %}<|turn>{{ 'model' if m.role == 'assistant' else m.role }}
{{ m.content | trim }}<turn|>
{% endfor %}{% if add_generation_prompt %}<|turn>model
{% endif %}{# reasoning: <|channel>thought\n...<channel|> #}
J
a=$(echo "Once upon a time" | "$LMQ" chat -m "$T/m8.lmq" --template "$T/gemma.jinja" $GEN 2>/dev/null)
b=$(echo "Once upon a time" | "$LMQ" chat -m "$T/m8.lmq" --template "$T/gemma.jinja" $GEN --reasoning 2>"$T/err")
check "a reply without a thought block is the answer, with or without --reasoning" "[ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]"
check "Gemma 4's template is recognised (no notice)" "! grep -q 'no effect' '$T/err'"

echo "cli_chat_think: $pass passed, $fail failed"
[ $fail -eq 0 ]
