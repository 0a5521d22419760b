#!/usr/bin/python3
"""Writes tests/data/chat-tools/: tool-bearing conversations (cases.json) and
what Hugging Face's apply_chat_template renders for them with each real
template (expected/<template>/<case>.txt, or .error with the exception),
for golden_chat_tools.c.

The renderer is Jinja2 set up as transformers' chat-template code does
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols;
tojson = json.dumps(ensure_ascii=False, ...); raise_exception raises
TemplateError(msg); strftime_now formats 2024-07-26), with the messages and
tools passed as apply_chat_template passes them: the OpenAI objects, tool
call arguments as dicts. Needs python3-jinja2. Gemma 4's templates are llama.cpp's
models/templates/google-gemma-4-31B-it.jinja and -interleaved.jinja, copied
into SHARED_DIR/chat-templates/templates/ (from ik_llama.cpp's tree, which
carries them: `git -C .../ik_llama.cpp show 8337e4cd:models/templates/NAME`).
Run from anywhere:

  tests/make_tool_renders.py [SHARED_DIR]
"""
import json, os, sys, datetime
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "shared")
OUT = os.path.join(HERE, "data", "chat-tools")

# template name -> (path under SHARED, special tokens)
TEMPLATES = {
    "Qwen-Qwen3": ("tokenizers/qwen3/tokenizer_config.json", {"eos_token": "<|im_end|>"}),
    "Qwen-Qwen2.5-7B-Instruct": ("chat-templates/templates/Qwen-Qwen2.5-7B-Instruct.jinja", {"eos_token": "<|im_end|>"}),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ("chat-templates/templates/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
                                                    {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"}),
    "meta-llama-Llama-3.1-8B-Instruct": ("chat-templates/templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
                                         {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "meta-llama-Llama-3.2-3B-Instruct": ("chat-templates/templates/meta-llama-Llama-3.2-3B-Instruct.jinja",
                                         {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}),
    "mistralai-Mistral-Nemo-Instruct-2407": ("chat-templates/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja",
                                             {"bos_token": "<s>", "eos_token": "</s>"}),
    # Gemma 4 (26B-A4B / 31B template: an empty thought block when thinking
    # is off), as llama.cpp's models/templates/google-gemma-4-31B-it.jinja
    "google-gemma-4-31B-it": ("chat-templates/templates/google-gemma-4-31B-it.jinja",
                              {"bos_token": "<bos>", "eos_token": "<eos>"}),
    "google-gemma-4-31B-it-interleaved": ("chat-templates/templates/google-gemma-4-31B-it-interleaved.jinja",
                                          {"bos_token": "<bos>", "eos_token": "<eos>"}),
}

# templates ../shared does not carry (checked where a copy was put there, as
# the docstring says; golden_chat_tools names them as not checked otherwise)
OPTIONAL = {"google-gemma-4-31B-it", "google-gemma-4-31B-it-interleaved"}

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Local time in a time zone.",
    "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}}}

def call(i, name, args):
    return {"id": i, "type": "function", "function": {"name": name, "arguments": args}}

CASES = [
    {"name": "call-and-result", "add_generation_prompt": True, "tools": [WEATHER], "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call("abc123XYZ", "get_weather", {"city": "Paris"})]},
        {"role": "tool", "tool_call_id": "abc123XYZ", "name": "get_weather", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}]},
    {"name": "system-two-tools-answered", "add_generation_prompt": True, "tools": [WEATHER, TIME], "messages": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "Weather in Oslo, in fahrenheit?"},
        {"role": "assistant", "content": "", "tool_calls": [call("q1w2e3r4t", "get_weather", {"city": "Oslo", "unit": "fahrenheit"})]},
        {"role": "tool", "tool_call_id": "q1w2e3r4t", "name": "get_weather", "content": "50 F, rain"},
        {"role": "assistant", "content": "50 °F and rain in Oslo."},
        {"role": "user", "content": "And the time in Tokyo?"}]},
    {"name": "parallel-calls", "add_generation_prompt": True, "tools": [WEATHER, TIME], "messages": [
        {"role": "user", "content": "Weather in Rome and time in UTC."},
        {"role": "assistant", "content": None, "tool_calls": [
            call("aaaaaaaa1", "get_weather", {"city": "Rome"}), call("bbbbbbbb2", "get_time", {"tz": "UTC"})]},
        {"role": "tool", "tool_call_id": "aaaaaaaa1", "name": "get_weather", "content": "25 C"},
        {"role": "tool", "tool_call_id": "bbbbbbbb2", "name": "get_time", "content": "12:00"}]},
    # thinking on: the reasoning of the tool-calling turn is rendered (Gemma 4's channel)
    {"name": "thinking-tool-turn", "add_generation_prompt": True, "tools": [WEATHER],
     "kwargs": {"enable_thinking": True}, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Is it warm in Lima?"},
        {"role": "assistant", "content": "", "reasoning_content": "I need the weather in Lima.",
         "tool_calls": [call("lima00001", "get_weather", {"city": "Lima", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "lima00001", "name": "get_weather", "content": "24 C, sunny"}]},
    # thinking off: an earlier answer keeps its text, the thought in it is dropped
    {"name": "thinking-history", "add_generation_prompt": True, "tools": None, "messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<|channel>thought\nSimple sum.<channel|>4"},
        {"role": "user", "content": "And 3+3?"}]},
]

class TemplateError(Exception):
    pass

def raise_exception(msg):
    raise TemplateError(msg)

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def strftime_now(fmt):
    return datetime.datetime(2024, 7, 26, 12, 0, 0).strftime(fmt)

def load(rel):
    with open(os.path.join(SHARED, rel), encoding="utf-8") as f:
        text = f.read()
    if rel.endswith(".json"):
        return json.loads(text)["chat_template"]
    return text

def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"about": __doc__.split("\n\n")[0],
                   "templates": {k: dict({"source": v[0], "special": v[1]}, **({"optional": True} if k in OPTIONAL else {}))
                                 for k, v in TEMPLATES.items()},
                   "cases": CASES}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for tname, (rel, special) in TEMPLATES.items():
        tmpl = env.from_string(load(rel))
        d = os.path.join(OUT, "expected", tname)
        os.makedirs(d, exist_ok=True)
        for c in CASES:
            base = os.path.join(d, c["name"])
            for ext in (".txt", ".error"):
                if os.path.exists(base + ext):
                    os.remove(base + ext)
            try:
                out = tmpl.render(messages=c["messages"], tools=c["tools"], add_generation_prompt=c["add_generation_prompt"],
                                  **special, **c.get("kwargs", {}))
                with open(base + ".txt", "w", encoding="utf-8", newline="") as f:
                    f.write(out)
            except TemplateError as e:
                with open(base + ".error", "w", encoding="utf-8") as f:
                    f.write("TemplateError: %s\n" % e)
            except Exception as e:  # the template failed in Jinja itself
                with open(base + ".error", "w", encoding="utf-8") as f:
                    f.write("%s: %s\n" % (type(e).__name__, e))
    print("wrote", OUT)

if __name__ == "__main__":
    main()
