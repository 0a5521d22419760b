# Shared by the shell tests that drive `lmq serve` (source it after setting
# LMQ, LMQ_SRC and T, the test's temp dir):
#   serve_need_npm PKG...            fail (not skip) when a pinned npm package is missing
#   serve_start LOG ARGS...          `lmq serve --port 0 ARGS` in the background; sets
#                                    SPID and URL (empty when it did not start)
#   serve_stop                       SIGINT, wait; returns the server's exit code
# The caller's EXIT trap should kill "$SPID" when it is set.

serve_need_npm() {
  command -v node >/dev/null || { echo "FAIL: node not installed (scripts/setup.sh)"; return 1; }
  local p
  for p in "$@"; do
    [ -f "$LMQ_SRC/tests/node/node_modules/$p/package.json" ] ||
      { echo "FAIL: the npm package $p is missing: run scripts/fetch-openai-client.sh"; return 1; }
  done
}

serve_start() {
  local log=$1; shift
  : >"$log" # exists before the server opens it (the wait loop greps it)
  "$LMQ" serve --port 0 "$@" 2>"$log" &
  SPID=$!; URL=""
  local i
  for i in $(seq 1 300); do
    URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1)
    [ -n "$URL" ] && break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.05
  done
}

serve_stop() {
  local rc
  kill -INT "$SPID"; wait "$SPID"; rc=$?
  SPID=""
  return $rc
}
