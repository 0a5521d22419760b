#!/usr/bin/env bash
# The lmq entry point: help, version, unknown commands and exit codes.
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
out=$("$LMQ" --help); rc=$?
check "--help exits 0" "[ $rc -eq 0 ]"
check "--help lists convert" "grep -q convert <<<\"\$out\""
out=$("$LMQ" --version); rc=$?
check "--version prints a version" "[ $rc -eq 0 ] && grep -Eq '^lmq [0-9]+\.[0-9]+' <<<\"\$out\""
"$LMQ" >/dev/null 2>&1; rc=$?
check "no command exits 2" "[ $rc -eq 2 ]"
err=$("$LMQ" frobnicate 2>&1 >/dev/null); rc=$?
check "unknown command exits 2" "[ $rc -eq 2 ]"
check "unknown command is named" "grep -q frobnicate <<<\"\$err\""
# the documented commands are all listed (a missing one fails here, it is not
# merely left out of the loop below)
listed=$("$LMQ" --help | awk '/^commands:/{f=1;next} f&&NF{print $1}')
for cmd in convert quantize info run chat tokenize perplexity compare bench export template; do
  check "--help lists $cmd" "grep -qx $cmd <<<\"\$listed\""
done
# every listed command answers --help with exit 0 and a usage line
for cmd in $listed; do
  out=$("$LMQ" "$cmd" --help 2>&1); rc=$?
  check "$cmd --help exits 0" "[ $rc -eq 0 ]"
  check "$cmd --help shows usage" "grep -qi usage <<<\"\$out\""
  "$LMQ" "$cmd" --no-such-flag >/dev/null 2>&1; rc=$?
  check "$cmd rejects an unknown flag with 2" "[ $rc -eq 2 ]"
done
# one thread limit (LMQ_MAX_THREADS = 512) for every -t
for cmd in "run -m x.lmq -p x" "chat -m x.lmq" "perplexity -m x.lmq" "compare -f x.txt a.lmq" "bench -m x.lmq" "quantize a.lmq b.lmq --type q8_0" "convert d -o o.lmq" "info x.lmq"; do
  flag=-t; [ "${cmd%% *}" = quantize ] && flag=--threads
  err=$("$LMQ" $cmd $flag 513 2>&1 >/dev/null); rc=$?
  check "${cmd%% *} $flag 513 exits 2 naming the limit ($err)" "[ $rc -eq 2 ] && grep -q '\[1, 512\]' <<<\"\$err\""
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
