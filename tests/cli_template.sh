#!/usr/bin/env bash
# lmq template: exact stdout (no newline added) against Hugging Face's renders,
# errors with line:col on stderr and exit 1, usage errors exit 2.
set -u
fail=0; pass=0
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
CT="$LMQ_SHARED/chat-templates"
if [ ! -f "$CT/cases.json" ]; then echo "SKIP: $CT missing (set LMQ_SHARED)"; exit 77; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cli_template.XXXXXX"); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/conv.json" <<'JSON'
{"messages": [{"role": "user", "content": "What's the weather in Paris?"}],
 "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]}
JSON
T=meta-llama-Llama-3.2-3B-Instruct
"$LMQ" template render "$CT/templates/$T.jinja" --messages "$tmp/conv.json" --var 'bos_token=<|begin_of_text|>' \
  --var 'eos_token=<|eot_id|>' --add-generation-prompt --now 2024-07-26 > "$tmp/out.txt"; rc=$?
check "render exits 0" "[ $rc -eq 0 ]"
check "render is byte-identical to HF (tools, strftime_now)" "cmp -s '$tmp/out.txt' '$CT/expected/$T/tools.txt'"
echo '[{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi!"}]' > "$tmp/list.json"
T=microsoft-Phi-3.5-mini-instruct
"$LMQ" template render "$CT/templates/$T.jinja" --messages "$tmp/list.json" --var 'eos_token=<|endoftext|>' > "$tmp/out2.txt"; rc=$?
check "a plain list of messages renders" "[ $rc -eq 0 ] && cmp -s '$tmp/out2.txt' '$CT/expected/$T/no-generation-prompt.txt'"
echo '[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]' > "$tmp/sys.json"
err=$("$LMQ" template render "$CT/templates/google-gemma-2-2b-it.jinja" --messages "$tmp/sys.json" 2>&1 >/dev/null); rc=$?
check "raise_exception exits 1" "[ $rc -eq 1 ]"
check "raise_exception message with line:col" "grep -q 'line 1 col 74: System role not supported' <<<\"\$err\""
printf '{{ x.y }}' > "$tmp/bad.jinja"
err=$("$LMQ" template render "$tmp/bad.jinja" --messages "$tmp/list.json" 2>&1 >/dev/null); rc=$?
check "undefined use exits 1 naming it" "[ $rc -eq 1 ] && grep -q \"line 1 col 5: UndefinedError: 'x' is undefined\" <<<\"\$err\""
printf '{%% if %%}' > "$tmp/syntax.jinja"
err=$("$LMQ" template render "$tmp/syntax.jinja" --messages "$tmp/list.json" 2>&1 >/dev/null); rc=$?
check "syntax error exits 1 with position" "[ $rc -eq 1 ] && grep -q 'line 1 col' <<<\"\$err\""
printf '{{ flag }}|{{ n + 1 }}' > "$tmp/vars.jinja"
out=$("$LMQ" template render "$tmp/vars.jinja" --messages "$tmp/list.json" --var flag=on --var-json n=41); rc=$?
check "--var and --var-json" "[ $rc -eq 0 ] && [ \"\$out\" = 'on|42' ]"
"$LMQ" template render "$tmp/vars.jinja" >/dev/null 2>&1; rc=$?
check "missing --messages exits 2" "[ $rc -eq 2 ]"
"$LMQ" template render "$tmp/vars.jinja" --messages "$tmp/list.json" --now 2024-13-01 >/dev/null 2>&1; rc=$?
check "bad --now exits 2" "[ $rc -eq 2 ]"
out=$("$LMQ" template name "$CT/templates/google-gemma-2-2b-it.jinja"); rc=$?
check "template name" "[ $rc -eq 0 ] && [ \"\$out\" = gemma ]"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
