#!/usr/bin/env bash
# Forced tool calls on 20 schema shapes through the official `openai` npm
# client, validated with ajv (tests/serve_schemas20.mjs), and tool_choice
# "required" over several tools, on llama-8m-debtext with the Qwen2.5 template
# (Hermes calls) and with no template (lmq describes the tools).
# Missing pieces (node, the npm packages) fail the test; they do not skip it.
set -u
: "${LMQ:?LMQ must name the lmq binary}"
M8=$LMQ_SHARED/models/llama-8m-debtext
TPL=$LMQ_SHARED/chat-templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja
for f in "$M8" "$TPL"; do [ -e "$f" ] || { echo "SKIP: $f missing"; exit 77; }; done
. "$LMQ_SRC/tests/serve_lib.sh"
serve_need_npm openai ajv || exit 1
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_serve_schemas20.XXXXXX")
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
export LMQ_NO_PROGRESS=1
"$LMQ" convert "$M8" -o "$T/m8.lmq" >/dev/null 2>&1 || { echo "FAIL: convert $M8"; exit 1; }
fail=0
run_part() {
  local part=$1; shift
  serve_start "$T/$part.log" -m "$T/m8.lmq" -t 1 -c 4096 "$@"
  if [ -z "$URL" ]; then echo "FAIL: the server ($part) did not start:"; cat "$T/$part.log"; fail=1; return; fi
  node "$LMQ_SRC/tests/serve_schemas20.mjs" "$part" "$URL" || fail=1
  serve_stop; rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: server ($part) exit $rc"; cat "$T/$part.log"; fail=1; }
}
run_part hermes --chat-template "$TPL"
run_part plain
exit $fail
