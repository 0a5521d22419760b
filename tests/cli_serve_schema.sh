#!/usr/bin/env bash
# Constrained decoding in lmq serve on llama-8m-debtext (tests/serve_schema.mjs):
# forced tool calls (named, "required") and response_format json_schema /
# json_object return complete JSON satisfying the schema; bad schemas are a 400.
# Parts: a Hermes template that renders tools (Qwen2.5), no template (lmq
# describes the tools), a template whose prompt ends inside <think> (the
# document is content, not reasoning), Mistral and Llama 3.1 templates (calls
# forced in their own syntax), a harmony template (the call's header ends the
# prompt), a Gemma 4 call marker (forcing is refused); then
# the qwen3 zoo model with its own template (the 151,669-token byte-level BPE
# vocabulary, <tool_call> a token of its own).
set -u
: "${LMQ:?LMQ must name the lmq binary}"
M8=$LMQ_SHARED/models/llama-8m-debtext
TPLS=$LMQ_SHARED/chat-templates/templates
QZ=$LMQ_SHARED/models/zoo/qwen3
R1=$TPLS/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja
for f in "$M8" "$QZ" "$R1" "$TPLS/Qwen-Qwen2.5-7B-Instruct.jinja" "$TPLS/mistralai-Mistral-Nemo-Instruct-2407.jinja" "$TPLS/meta-llama-Llama-3.1-8B-Instruct.jinja"; do
  [ -e "$f" ] || { echo "SKIP: $f missing"; exit 77; }
done
. "$LMQ_SRC/tests/serve_lib.sh"
serve_need_npm || exit 1 # node only: the script uses fetch
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_serve_schema.XXXXXX")
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
export LMQ_NO_PROGRESS=1
"$LMQ" convert "$M8" -o "$T/m8.lmq" >/dev/null 2>&1 || { echo "FAIL: convert $M8"; exit 1; }
fail=0
run_part() {
  local part=$1 model=$2; shift 2
  serve_start "$T/$part.log" -m "$model" -t 1 -c 2048 "$@"
  if [ -z "$URL" ]; then echo "FAIL: the server ($part) did not start:"; cat "$T/$part.log"; fail=1; return; fi
  node "$LMQ_SRC/tests/serve_schema.mjs" "$part" "$URL" || fail=1
  serve_stop; rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: server ($part) exit $rc"; cat "$T/$part.log"; fail=1; }
}
run_part hermes "$T/m8.lmq" --chat-template "$TPLS/Qwen-Qwen2.5-7B-Instruct.jinja"
run_part plain "$T/m8.lmq" --timeout 2
run_part think-open "$T/m8.lmq" --chat-template "$R1"
run_part mistral "$T/m8.lmq" --chat-template "$TPLS/mistralai-Mistral-Nemo-Instruct-2407.jinja"
run_part llama3 "$T/m8.lmq" -c 4096 --chat-template "$TPLS/meta-llama-Llama-3.1-8B-Instruct.jinja" # its tool list is long
# a template with Gemma 4's call marker: forcing a call in that form is a 400
printf '%s' "{% for m in messages %}<start>{{ m.role }}: {{ m.content }}<end>{% endfor %}{% if tools %}<|tool_call>call:{% endif %}{% if add_generation_prompt %}<start>model: {% endif %}" >"$T/g4.jinja"
run_part gemma4 "$T/m8.lmq" --chat-template "$T/g4.jinja"
# a harmony template in gpt-oss's shape: a forced call's header ends the prompt
cat >"$T/harmony.jinja" <<'J'
{%- for m in messages %}<|start|>{{ m.role }}{% if m.role == 'assistant' %}<|channel|>final{% endif %}<|message|>{{ m.content }}<|end|>{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}
J
run_part harmony "$T/m8.lmq" --chat-template "$T/harmony.jinja"
"$LMQ" convert "$QZ" -o "$T/q3.lmq" >/dev/null 2>&1 || { echo "FAIL: convert $QZ"; exit 1; }
run_part qwen3 "$T/q3.lmq"
exit $fail
