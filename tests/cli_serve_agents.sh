#!/usr/bin/env bash
# lmq serve's agent-facing features on llama-8m-debtext with the official
# OpenAI client (tests/serve_agents.mjs): logprobs, n > 1, seeds, usage,
# reasoning_content with real <think> templates (--chat-template), tools, the
# Responses API, bad input; the Vercel AI SDK and the OpenAI Agents SDK
# (tests/serve_sdks.mjs).
# Missing pieces (node, the openai client) fail the test; they do not skip it.
set -u
: "${LMQ:?LMQ must name the lmq binary}"
M8=$LMQ_SHARED/models/llama-8m-debtext
TPL=$LMQ_SHARED/chat-templates/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja
Q3=$LMQ_SHARED/tokenizers/qwen3/tokenizer_config.json
QZ=$LMQ_SHARED/models/zoo/qwen3
for f in "$M8" "$TPL" "$Q3" "$QZ"; do [ -e "$f" ] || { echo "SKIP: $f missing"; exit 77; }; done
. "$LMQ_SRC/tests/serve_lib.sh"
serve_need_npm openai ai @ai-sdk/openai-compatible @openai/agents zod || exit 1
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_serve_agents.XXXXXX")
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
  node "$LMQ_SRC/tests/serve_agents.mjs" "$part" "$URL" || fail=1
  if [ "$part" = core ]; then node "$LMQ_SRC/tests/serve_sdks.mjs" "$URL" || fail=1; fi
  serve_stop; rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: server ($part) exit $rc"; cat "$T/$part.log"; fail=1; }
}
run_part core "$T/m8.lmq"
run_part think-open "$T/m8.lmq" --chat-template "$TPL"
run_part qwen3 "$T/m8.lmq" --chat-template "$Q3"
run_part tools "$T/m8.lmq" --chat-template "$LMQ_SHARED/chat-templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
# the qwen3 zoo model (Qwen3ForCausalLM layout, its own template): the same client checks and SDKs
"$LMQ" convert "$QZ" -o "$T/q3.lmq" >/dev/null 2>&1 || { echo "FAIL: convert $QZ"; exit 1; }
run_part core "$T/q3.lmq"
"$LMQ" serve -m "$T/m8.lmq" --chat-template "$T/missing.jinja" --port 0 >/dev/null 2>"$T/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "missing.jinja" "$T/err"; then echo "ok - a missing --chat-template fails naming it"
else echo "FAIL: missing --chat-template (rc $rc)"; cat "$T/err"; fail=1; fi
exit $fail
