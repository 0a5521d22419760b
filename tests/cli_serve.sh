#!/usr/bin/env bash
# lmq serve end to end on llama-8m-debtext: the official OpenAI client
# (tests/serve_client.mjs) for chat, streams, stop strings, seeds, concurrency,
# disconnects, the queue and auth; curl for each kind of bad input (malformed
# JSON, wrong types, 100 MB bodies with and without a length, slow-loris,
# unknown paths and methods); graceful shutdown on SIGTERM.
# Missing pieces (node, the openai client, curl) fail the test; they do not skip it.
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
: "${LMQ:?LMQ must name the lmq binary}"
M8=$LMQ_SHARED/models/llama-8m-debtext
if [ ! -d "$M8" ]; then echo "SKIP: $M8 missing"; echo "0 passed, 0 failed"; exit 0; fi
for tool in node curl; do
  command -v $tool >/dev/null || { echo "FAIL: $tool not installed (scripts/setup.sh)"; exit 1; }
done
[ -f "$LMQ_SRC/tests/node/node_modules/openai/package.json" ] ||
  { echo "FAIL: the openai npm client is missing: run scripts/fetch-openai-client.sh"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/cli_serve.XXXXXX")
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
export LMQ_NO_PROGRESS=1
"$LMQ" convert "$M8" -o "$T/m8.lmq" >/dev/null 2>&1 || { echo "FAIL: convert $M8"; exit 1; }

# Starts a server with --port 0; sets SPID and URL (from its "listening on" line).
start_server() {
  local log=$1; shift
  "$LMQ" serve -m "$T/m8.lmq" --port 0 "$@" 2>"$log" &
  SPID=$!; PIDS+=("$SPID"); URL=""
  for _ in $(seq 1 300); do
    URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1)
    [ -n "$URL" ] && return 0
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.05
  done
  echo "FAIL: the server did not start:"; cat "$log"; exit 1
}
alive() { kill -0 "$SPID" 2>/dev/null && curl -sf -H "Authorization: Bearer $KEY" "$URL/health" >/dev/null; }
# status code of a request: http_code METHOD PATH [curl args...]
http_code() { local m=$1 p=$2; shift 2; curl -s -o "$T/body" -w '%{http_code}' -X "$m" -H "Authorization: Bearer $KEY" "$@" "$URL$p"; }
is_error_shape() { grep -q '^{"error":{"message":"[^"]*","type":"[a-z_]*","param":' "$T/body"; }

# ---- usage errors
"$LMQ" serve >/dev/null 2>&1; rc=$?
check "serve without -m is a usage error (2)" "[ $rc -eq 2 ]"
"$LMQ" serve -m "$T/m8.lmq" --parallel 0 >/dev/null 2>&1; rc=$?
check "--parallel 0 is a usage error" "[ $rc -eq 2 ]"
"$LMQ" serve -m "$T/missing.lmq" --port 0 >/dev/null 2>&1; rc=$?
check "a missing model fails (1)" "[ $rc -eq 1 ]"

# ---- expected greedy outputs from lmq run on the same rendered prompts
echo "Hello, who are you?" | "$LMQ" chat -m "$T/m8.lmq" --render > "$T/chat_prompt.txt"
"$LMQ" run -m "$T/m8.lmq" -f "$T/chat_prompt.txt" --no-echo --temp 0 -n 24 -c 512 -t 1 > "$T/expect_chat.txt" 2>/dev/null
"$LMQ" run -m "$T/m8.lmq" -p "Once upon a time" --no-echo --temp 0 -n 24 -c 512 -t 1 > "$T/expect_cmpl.txt" 2>/dev/null
check "lmq run produced the expected texts" "[ -s '$T/expect_chat.txt' ] && [ -s '$T/expect_cmpl.txt' ]"

# ---- the OpenAI client
KEY=sk-test-$$
start_server "$T/s1.log" --parallel 2 -t 1 -c 512 --api-key "$KEY" --alias debtext --timeout 2
node "$LMQ_SRC/tests/serve_client.mjs" "$URL" "$KEY" debtext "$T/expect_chat.txt" "$T/expect_cmpl.txt" > "$T/node.out" 2>&1; rc=$?
cat "$T/node.out"
check "the OpenAI client checks pass" "[ $rc -eq 0 ] && grep -q ', 0 failed' '$T/node.out'"

# ---- curl: auth, routes, bad input
check "no API key: 401 in OpenAI's error shape" "[ \$(curl -s -o '$T/body' -w '%{http_code}' '$URL/v1/models') = 401 ] && is_error_shape"
check "/health with the key: 200" "[ \$(http_code GET /health) = 200 ] && grep -q '\"status\":\"ok\"' '$T/body'"
check "unknown path: 404" "[ \$(http_code GET /v1/nothing) = 404 ] && is_error_shape"
check "GET on a POST endpoint: 405" "[ \$(http_code GET /v1/chat/completions) = 405 ] && is_error_shape"
CH=/v1/chat/completions
check "malformed JSON: 400" "[ \$(http_code POST $CH -d '{\"messages\": [') = 400 ] && is_error_shape"
check "a JSON array body: 400" "[ \$(http_code POST $CH -d '[1,2]') = 400 ] && is_error_shape"
check "empty body: 400" "[ \$(http_code POST $CH) = 400 ] && is_error_shape"
check "messages not a list: 400 naming the param" "[ \$(http_code POST $CH -d '{\"messages\":\"hi\"}') = 400 ] && grep -q '\"param\":\"messages\"' '$T/body'"
check "content of the wrong type: 400" "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":42}]}') = 400 ] && is_error_shape"
check "role missing: 400" "[ \$(http_code POST $CH -d '{\"messages\":[{\"content\":\"hi\"}]}') = 400 ] && is_error_shape"
check "temperature a string: 400 naming the param" "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":\"hot\"}') = 400 ] && grep -q '\"param\":\"temperature\"' '$T/body'"
check "max_tokens a float: 400" "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":1.5}') = 400 ] && grep -q '\"param\":\"max_tokens\"' '$T/body'"
check "stream not a boolean: 400" "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":\"yes\"}') = 400 ] && grep -q '\"param\":\"stream\"' '$T/body'"
check "stop a number: 400" "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":7}') = 400 ] && grep -q '\"param\":\"stop\"' '$T/body'"
check "five stop strings: 400" "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}') = 400 ] && is_error_shape"
check "n=9: 400" "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":9}') = 400 ] && is_error_shape"
check "unknown fields are ignored: 200" "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2,\"user\":\"x\",\"logit_bias\":{}}') = 200 ]"
check "the llama2 template's own error (roles must alternate): 400" \
  "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]}') = 400 ] && grep -q 'template' '$T/body'"
check "max_tokens beyond the context: 400 context_length_exceeded" \
  "[ \$(http_code POST $CH -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":600}') = 400 ] && grep -q context_length_exceeded '$T/body'"
check "completions: prompt missing: 400" "[ \$(http_code POST /v1/completions -d '{}') = 400 ] && grep -q '\"param\":\"prompt\"' '$T/body'"
head -c 100000000 /dev/zero | tr '\0' 'a' > "$T/big.json"
check "100 MB body with Content-Length: 413" "[ \$(http_code POST $CH --data-binary @'$T/big.json') = 413 ] && is_error_shape"
check "100 MB chunked body: 413" "[ \$(http_code POST $CH -H 'Transfer-Encoding: chunked' --data-binary @'$T/big.json') = 413 ] && is_error_shape"
rm -f "$T/big.json"
big=$(head -c 100000 /dev/zero | tr '\0' a)
check "100 KB of headers: 431" "[ \$(http_code GET /health -H 'X-Big: $big') = 431 ]"
check "100 KB request line: 414" "[ \$(http_code GET '/health?$big') = 414 ]"
# slow-loris: half a request line, then silence; the server closes it after --timeout (2 s)
t0=$(date +%s%3N)
port=${URL##*:}
exec 3<>/dev/tcp/127.0.0.1/"$port"
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le' >&3
rc=0; timeout 60 cat <&3 >/dev/null || rc=$?; exec 3<&-
el=$(( $(date +%s%3N) - t0 ))
check "a stalled request is closed after the idle timeout (took ${el} ms, closed by the server: rc $rc)" "[ $el -ge 1500 ] && [ $rc = 0 ]"
# a body that stalls halfway through
t0=$(date +%s%3N)
exec 3<>/dev/tcp/127.0.0.1/"$port"
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n{"messages":' "$KEY" >&3
rc=0; timeout 60 cat <&3 >/dev/null || rc=$?; exec 3<&-
el=$(( $(date +%s%3N) - t0 ))
check "a stalled body is closed after the idle timeout (took ${el} ms, closed by the server: rc $rc)" "[ $el -ge 1500 ] && [ $rc = 0 ]"
check "the server survived all of it, every slot idle" \
  "alive && [ \$(http_code GET /health) = 200 ] && grep -q '\"slots_idle\":2,\"queue\":0' '$T/body'"
check "the server logged no crash" "! grep -qi 'sanitizer\|segmentation\|abort' '$T/s1.log'"
kill -INT "$SPID"; wait "$SPID"; rc=$?
check "SIGINT: exit 0" "[ $rc -eq 0 ]"

# ---- clients that leave, then graceful shutdown (one slot, a long context:
# greedy replies of thousands of tokens take seconds)
KEY=""
start_server "$T/s2.log" --parallel 1 -t 1 -c 4096
LONG='{"prompt":"Once upon a time","max_tokens":4000,"temperature":0'
health() { curl -s "$URL/health"; }
wait_health() { for _ in $(seq 1 100); do health | grep -q "$1" && return 0; sleep 0.02; done; return 1; }
curl -s --max-time 0.3 "$URL/v1/completions" -d "$LONG}" >/dev/null
check "a non-streamed request whose client left frees its slot" "wait_health '\"slots_idle\":1,\"queue\":0,\"requests_served\":1,\"requests_cancelled\":1'"
curl -sN "$URL/v1/completions" -d "$LONG,\"stream\":true}" > "$T/stream.txt" &
CPID=$!
for _ in $(seq 1 200); do [ -s "$T/stream.txt" ] && break; sleep 0.01; done
curl -s --max-time 0.5 "$URL/v1/completions" -d "$LONG}" >/dev/null &
QPID=$!
check "a second request waits in the queue" "wait_health '\"queue\":1'"
wait "$QPID"
check "a queued client that leaves gives its place back" "wait_health '\"slots_idle\":0,\"queue\":0,\"requests_served\":2,\"requests_cancelled\":2'"
kill -TERM "$SPID"; wait "$SPID"; rc=$?; wait "$CPID"
check "SIGTERM during a stream: exit 0" "[ $rc -eq 0 ]"
check "the stream ended with an error event" "grep -q '^data: {\"error\":{\"message\":\"the server is shutting down\"' '$T/stream.txt'"
check "no [DONE] after the error" "! grep -q 'DONE' '$T/stream.txt'"
check "the stream had content before the error" "[ \$(grep -c '\"text\"' '$T/stream.txt') -gt 1 ]"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
