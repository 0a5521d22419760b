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
command -v node >/dev/null || { echo "FAIL: node not installed (scripts/setup.sh)"; exit 1; }
for p in openai ajv; do
  [ -f "$LMQ_SRC/tests/node/node_modules/$p/package.json" ] ||
    { echo "FAIL: the npm package $p is missing: run scripts/fetch-openai-client.sh"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_serve_schemas20.XXXXXX")
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
export LMQ_NO_PROGRESS=1
"$LMQ" convert "$M8" -o "$T/m8.lmq" >/dev/null 2>&1 || { echo "FAIL: convert $M8"; exit 1; }
fail=0
run_part() {
  local part=$1; shift
  : >"$T/$part.log"
  "$LMQ" serve -m "$T/m8.lmq" --port 0 -t 1 -c 4096 "$@" 2>"$T/$part.log" &
  SPID=$!; URL=""
  for _ in $(seq 1 300); do
    URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$T/$part.log" | head -1)
    [ -n "$URL" ] && break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.05
  done
  if [ -z "$URL" ]; then echo "FAIL: the server ($part) did not start:"; cat "$T/$part.log"; fail=1; return; fi
  node "$LMQ_SRC/tests/serve_schemas20.mjs" "$part" "$URL" || fail=1
  kill -INT "$SPID"; wait "$SPID"; rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: server ($part) exit $rc"; cat "$T/$part.log"; fail=1; }
  SPID=""
}
run_part hermes --chat-template "$TPL"
run_part plain
exit $fail
