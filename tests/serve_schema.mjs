// Constrained decoding in lmq serve (docs/SERVE.md "Constrained decoding"):
// tool_choice named/"required" and response_format json_schema/json_object
// must return complete JSON that satisfies the schema, checked here by an
// explicit validator of the keywords the schemas use; bad schemas are a 400.
// Called by tests/cli_serve_schema.sh: node serve_schema.mjs PART URL
// (PART: "hermes" with a template that renders tools, "plain" without one,
// "think-open" a template whose prompt ends inside <think>, "qwen3" the qwen3 zoo model with its own template, "mistral" and "llama3"
// for those call syntaxes, "harmony" (the call's header
// ends the prompt), "gemma4" for one that cannot be forced yet).
const [part, base] = process.argv.slice(2);
let fails = 0;
const ok = (cond, what) => { console.log((cond ? 'ok - ' : 'FAIL: ') + `${part}: ${what}`); if (!cond) fails++; };

async function post(body) {
  const r = await fetch(base + '/v1/chat/completions', {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch {}
  return { status: r.status, json, text };
}

// The validator: type, properties/required (no key outside properties),
// items, minItems/maxItems, enum, const, minimum/maximum, minLength/maxLength,
// anyOf. Returns null or the first violation with its path.
const typeOf = (v) => v === null ? 'null' : Array.isArray(v) ? 'array'
  : typeof v === 'number' ? (Number.isInteger(v) ? 'integer' : 'number') : typeof v;
function check(s, v, at = '$') {
  if (s.anyOf) return s.anyOf.some((a) => check(a, v, at) === null) ? null : `${at}: matches no anyOf branch`;
  if (s.const !== undefined && JSON.stringify(s.const) !== JSON.stringify(v)) return `${at}: not the const`;
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) return `${at}: ${JSON.stringify(v)} not in enum`;
  if (s.type) {
    const types = Array.isArray(s.type) ? s.type : [s.type], t = typeOf(v);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) return `${at}: ${t}, expected ${types}`;
  }
  const t = typeOf(v);
  if (t === 'object') {
    for (const r of s.required || []) if (!(r in v)) return `${at}: missing '${r}'`;
    if (s.properties) {
      for (const k of Object.keys(v)) {
        if (!(k in s.properties)) return `${at}: key '${k}' outside properties`;
        const e = check(s.properties[k], v[k], `${at}.${k}`);
        if (e) return e;
      }
    }
  }
  if (t === 'array') {
    if (s.minItems !== undefined && v.length < s.minItems) return `${at}: ${v.length} items < ${s.minItems}`;
    if (s.maxItems !== undefined && v.length > s.maxItems) return `${at}: ${v.length} items > ${s.maxItems}`;
    if (s.items) for (let i = 0; i < v.length; i++) { const e = check(s.items, v[i], `${at}[${i}]`); if (e) return e; }
  }
  if (t === 'integer' || t === 'number') {
    if (s.minimum !== undefined && v < s.minimum) return `${at}: ${v} < ${s.minimum}`;
    if (s.maximum !== undefined && v > s.maximum) return `${at}: ${v} > ${s.maximum}`;
  }
  if (t === 'string') {
    const n = [...v].length;
    if (s.minLength !== undefined && n < s.minLength) return `${at}: length ${n} < ${s.minLength}`;
    if (s.maxLength !== undefined && n > s.maxLength) return `${at}: length ${n} > ${s.maxLength}`;
  }
  return null;
}
// the validator itself must reject what it should
const selfTest = [
  [{ type: 'integer', minimum: 1, maximum: 3 }, 4], [{ type: 'integer' }, 1.5], [{ enum: ['a'] }, 'b'],
  [{ type: 'array', minItems: 2 }, [1]], [{ type: 'object', properties: { a: {} }, required: ['a'] }, {}],
  [{ type: 'object', properties: { a: {} } }, { b: 1 }], [{ anyOf: [{ type: 'string' }, { type: 'null' }] }, 3],
  [{ type: 'string', maxLength: 2 }, 'abc'],
];
ok(selfTest.every(([s, v]) => check(s, v) !== null), 'the test validator rejects invalid documents');

const schemas = {
  nested: { type: 'object', properties: {
    user: { type: 'object', properties: { name: { type: 'string', maxLength: 16 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
      required: ['name', 'age'] } }, required: ['user'] },
  list: { type: 'object', properties: { items: { type: 'array', items: { type: 'string', maxLength: 8 }, minItems: 2, maxItems: 4 } },
    required: ['items'] },
  choice: { type: 'object', properties: { unit: { enum: ['celsius', 'fahrenheit', 'kelvin'] }, mode: { type: 'string', enum: ['a', 'b'] } },
    required: ['unit', 'mode'] },
  bounded: { type: 'object', properties: { n: { type: 'integer', minimum: -3, maximum: 7 }, big: { type: 'integer', minimum: 1000, maximum: 1005 } },
    required: ['n', 'big'] },
  optional: { type: 'object', properties: { city: { type: 'string', maxLength: 10 }, days: { type: 'integer', minimum: 1, maximum: 9 } },
    required: ['city'] },
  nullable: { type: 'object', properties: { note: { anyOf: [{ type: 'string', maxLength: 12 }, { type: 'null' }] }, flag: { type: 'boolean' } },
    required: ['note', 'flag'] },
};
const tools = Object.entries(schemas).map(([name, parameters]) => ({ type: 'function', function: { name, description: `tool ${name}`, parameters } }));
const messages = [{ role: 'user', content: 'Call the tool please.' }];

function argsOf(r, name, what) {
  const m = r.json?.choices?.[0]?.message;
  const calls = m?.tool_calls || [];
  if (r.status !== 200 || calls.length !== 1) { ok(false, `${what}: one tool call (status ${r.status}: ${r.text.slice(0, 300)})`); return; }
  ok(calls[0].function.name === name && r.json.choices[0].finish_reason === 'tool_calls',
     `${what}: calls '${name}' (got '${calls[0].function.name}', finish_reason ${r.json.choices[0].finish_reason})`);
  let a;
  try { a = JSON.parse(calls[0].function.arguments); } catch { ok(false, `${what}: arguments are complete JSON: ${calls[0].function.arguments}`); return; }
  return a;
}

if (part === 'mistral' || part === 'llama3') {
  // forced calls in the model's own syntax ([TOOL_CALLS][{...}] / the bare {"name", "parameters"} object)
  for (const name of ['list', 'nested', 'nullable']) {
    const r = await post({ messages, tools, tool_choice: { type: 'function', function: { name } }, seed: 5, temperature: 1.0 });
    const a = argsOf(r, name, `${part}: tool_choice ${name}`);
    if (a !== undefined) { const e = check(schemas[name], a); ok(e === null, `${part}: ${name}: arguments satisfy the schema ${e || JSON.stringify(a)}`); }
  }
  for (const seed of [6, 7]) {
    const r = await post({ messages, tools: tools.slice(0, 4), tool_choice: 'required', seed, temperature: 1.0 });
    const calls = r.json?.choices?.[0]?.message?.tool_calls || [];
    const s = calls.length === 1 ? schemas[calls[0].function.name] : undefined;
    let a; try { a = JSON.parse(calls[0].function.arguments); } catch {}
    ok(r.status === 200 && s && a !== undefined && check(s, a) === null,
       `${part}: required over 4 tools, seed ${seed}: one valid call (${r.status} ${JSON.stringify(calls).slice(0, 200)})`);
  }
  const j = await post({ messages, response_format: { type: 'json_object' }, seed: 1 });
  let c = null; try { c = JSON.parse(j.json.choices[0].message.content); } catch {}
  ok(j.status === 200 && typeOf(c) === 'object', `${part}: json_object works whatever the tool format`);
  process.exit(fails ? 1 : 0);
}
if (part === 'harmony') {
  // the call's header ends the prompt; the output is the arguments alone
  for (const name of ['list', 'nested', 'bounded']) {
    const r = await post({ messages, tools, tool_choice: { type: 'function', function: { name } }, seed: 8, temperature: 1.0 });
    const a = argsOf(r, name, `tool_choice ${name}`);
    if (a !== undefined) { const e = check(schemas[name], a); ok(e === null, `${name}: arguments satisfy the schema ${e || JSON.stringify(a)}`); }
    ok(!r.json?.choices?.[0]?.message?.content, `${name}: no content beside the call`);
  }
  {
    const r = await post({ messages, tools: [tools[0]], tool_choice: 'required', seed: 9 });
    const a = argsOf(r, 'nested', 'required with one tool');
    if (a !== undefined) ok(check(schemas.nested, a) === null, `required with one tool: valid arguments ${JSON.stringify(a)}`);
  }
  {
    const res = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages, tools, tool_choice: { type: 'function', function: { name: 'choice' } }, stream: true, seed: 10 }) });
    let args = '', name = '', finish = null;
    for (const line of (await res.text()).split('\n')) {
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const ch = JSON.parse(line.slice(6)).choices?.[0];
      for (const tc of ch?.delta?.tool_calls || []) { if (tc.function?.name) name = tc.function.name; args += tc.function?.arguments || ''; }
      if (ch?.finish_reason) finish = ch.finish_reason;
    }
    let a; try { a = JSON.parse(args); } catch {}
    ok(name === 'choice' && finish === 'tool_calls' && a !== undefined && check(schemas.choice, a) === null,
       `streamed: the merged fragments are a valid call (${name} ${finish} ${args})`);
  }
  {
    const f = await post({ messages, tools, tool_choice: { type: 'function', function: { name: 'list' } }, max_tokens: 1 });
    const a = await post({ messages, tools, tool_choice: 'auto', max_tokens: 1 });
    const d = (f.json?.usage?.prompt_tokens ?? 0) - (a.json?.usage?.prompt_tokens ?? 0);
    ok(f.status === 200 && a.status === 200 && d > 5, `the forced call's header is in the prompt (${d} more prompt tokens)`);
  }
  {
    const bad = [{ type: 'function', function: { name: 'x<|end|>', parameters: schemas.list } }];
    const r = await post({ messages, tools: bad, tool_choice: { type: 'function', function: { name: 'x<|end|>' } } });
    ok(r.status === 400 && /cannot be forced/.test(r.json?.error?.message), `a tool name with a marker is not put in the header (${r.status})`);
  }
  const r2 = await post({ messages, tools, tool_choice: 'required' });
  ok(r2.status === 400 && /harmony/.test(r2.json?.error?.message), `required over several tools is a 400 naming harmony (${r2.status})`);
  const r3 = await post({ messages, tools, tool_choice: { type: 'function', function: { name: 'list' } }, response_format: { type: 'json_object' } });
  ok(r3.status === 400 && /response_format/.test(r3.json?.error?.message), `a forced call beside response_format is a 400 (${r3.status})`);
  process.exit(fails ? 1 : 0);
}
if (part === 'gemma4') {
  const r = await post({ messages, tools, tool_choice: { type: 'function', function: { name: 'list' } } });
  ok(r.status === 400 && /gemma4/.test(r.json?.error?.message), `forcing a call in the Gemma 4 format is a 400 naming why (${r.status})`);
  process.exit(fails ? 1 : 0);
}

// named tool_choice: each shape, two seeds
for (const [name, schema] of Object.entries(schemas)) {
  for (const seed of [1, 2]) {
    const r = await post({ messages, tools, tool_choice: { type: 'function', function: { name } }, seed, temperature: 1.0 });
    const a = argsOf(r, name, `tool_choice ${name} seed ${seed}`);
    if (a !== undefined) { const e = check(schema, a); ok(e === null, `tool_choice ${name} seed ${seed}: arguments satisfy the schema ${e || JSON.stringify(a)}`); }
  }
}
// "required" with one tool
{
  const r = await post({ messages, tools: [tools[3]], tool_choice: 'required', seed: 3 });
  const a = argsOf(r, 'bounded', 'tool_choice required (one tool)');
  if (a !== undefined) ok(check(schemas.bounded, a) === null, `required: arguments satisfy the schema ${JSON.stringify(a)}`);
  // several tools: tests/serve_schemas20.mjs; more than the matcher reads at once (32) is a 400 naming the limit
  const many = Array.from({ length: 33 }, (_, i) => ({ type: 'function', function: { name: `t${i}`, parameters: schemas.bounded } }));
  const r2 = await post({ messages, tools: many, tool_choice: 'required' });
  ok(r2.status === 400 && r2.json?.error?.param === 'tool_choice' && /limit 32/.test(r2.json?.error?.message),
     `required with 33 tools is a 400 naming the limit (${r2.status} ${r2.json?.error?.message})`);
}
// streaming a forced call: the merged argument fragments satisfy the schema
{
  const res = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, tools, tool_choice: { type: 'function', function: { name: 'nested' } }, stream: true, seed: 4 }) });
  const body = await res.text();
  let args = '', name = '', finish = null;
  for (const line of body.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const ch = JSON.parse(line.slice(6)).choices?.[0];
    for (const tc of ch?.delta?.tool_calls || []) { if (tc.function?.name) name = tc.function.name; args += tc.function?.arguments || ''; }
    if (ch?.finish_reason) finish = ch.finish_reason;
  }
  let a = null; try { a = JSON.parse(args); } catch {}
  ok(name === 'nested' && finish === 'tool_calls' && a !== null && check(schemas.nested, a) === null,
     `streamed forced call: name ${name}, finish ${finish}, arguments ${args}`);
}
// a streamed forced call that takes longer than the server's --timeout (2 s
// in the "plain" part) without a chunk: SSE comments keep the connection open
if (part === 'plain') {
  const long = { type: 'object', properties: { u: { type: 'string', minLength: 1800, maxLength: 1900 }, v: { type: 'string', minLength: 1800, maxLength: 1900 } },
    required: ['u', 'v'] };
  const t0 = Date.now();
  const res = await fetch(base + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages, tools: [{ type: 'function', function: { name: 'long', parameters: long } }], tool_choice: 'required', stream: true, seed: 9 }) });
  const body = await res.text();
  let args = '', finish = null, comments = 0;
  for (const line of body.split('\n')) {
    if (line.startsWith(':')) comments++;
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const ch = JSON.parse(line.slice(6)).choices?.[0];
    for (const tc of ch?.delta?.tool_calls || []) args += tc.function?.arguments || '';
    if (ch?.finish_reason) finish = ch.finish_reason;
  }
  let a = null; try { a = JSON.parse(args); } catch {}
  const secs = (Date.now() - t0) / 1000;
  ok(finish === 'tool_calls' && a !== null && check(long, a) === null && body.includes('[DONE]'),
     `a streamed forced call of ${secs.toFixed(1)} s (${comments} keep-alive comments) arrives whole (${args.length} bytes of arguments)`);
}
// response_format json_schema (n = 2: each choice) and json_object
for (const [key, schema] of Object.entries(schemas)) {
  const r = await post({ messages: [{ role: 'user', content: 'Answer in JSON.' }], n: 2, seed: 5,
    response_format: { type: 'json_schema', json_schema: { name: key, schema, strict: true } } });
  if (r.status !== 200) { ok(false, `response_format ${key}: status ${r.status} ${r.text.slice(0, 300)}`); continue; }
  for (const c of r.json.choices) {
    let v; try { v = JSON.parse(c.message.content); } catch { ok(false, `response_format ${key}: content is complete JSON: ${c.message.content}`); continue; }
    const e = check(schema, v);
    ok(e === null && c.finish_reason === 'stop', `response_format ${key} choice ${c.index}: content satisfies the schema ${e || JSON.stringify(v)}`);
  }
}
// /v1/completions: the text after the prompt is the document
if (part === 'plain') {
  const r = await fetch(base + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'The user as JSON:', seed: 12, response_format: { type: 'json_schema', json_schema: { name: 'n', schema: schemas.nested } } }) });
  const j = await r.json();
  let v; try { v = JSON.parse(j.choices[0].text); } catch {}
  ok(r.status === 200 && v !== undefined && check(schemas.nested, v) === null && j.choices[0].finish_reason === 'stop',
     `completions response_format json_schema: ${j.choices?.[0]?.text} (${j.choices?.[0]?.finish_reason})`);
  const b = await fetch(base + '/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'x', response_format: { type: 'json_schema', json_schema: { schema: { type: 'string', pattern: 'a' } } } }) });
  const bj = await b.json();
  ok(b.status === 400 && bj.error?.param === 'response_format' && /pattern/.test(bj.error?.message), `completions: a bad schema is a 400 (${bj.error?.message})`);
}
{
  const r = await post({ messages, response_format: { type: 'json_object' }, seed: 6 });
  let v = null; try { v = JSON.parse(r.json.choices[0].message.content); } catch {}
  ok(r.status === 200 && typeOf(v) === 'object', `json_object: content is one JSON object (${r.json?.choices?.[0]?.message?.content})`);
}
// the Responses API: text.format json_schema and a named function tool_choice
{
  const rpost = async (body) => { const r = await fetch(base + '/v1/responses', { method: 'POST',
    headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }); return { status: r.status, json: await r.json() }; };
  const fmt = { type: 'json_schema', name: 'bounded', schema: schemas.bounded, strict: true };
  const r = await rpost({ input: 'Answer in JSON.', seed: 7, text: { format: fmt } });
  const text = r.json?.output?.[0]?.content?.[0]?.text;
  let v; try { v = JSON.parse(text); } catch {}
  ok(r.status === 200 && r.json.status === 'completed' && v !== undefined && check(schemas.bounded, v) === null &&
     r.json.text?.format?.type === 'json_schema', `responses text.format json_schema: ${text}`);
  const rt = await rpost({ input: 'Call it.', seed: 8, tools: [{ type: 'function', name: 'list', parameters: schemas.list }],
    tool_choice: { type: 'function', name: 'list' } });
  const call = (rt.json?.output || []).find((o) => o.type === 'function_call');
  let a; try { a = JSON.parse(call.arguments); } catch {}
  ok(rt.status === 200 && call?.name === 'list' && a !== undefined && check(schemas.list, a) === null,
     `responses named tool_choice: ${call?.name} ${call?.arguments}`);
  const bad = await rpost({ input: 'x', text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object', allOf: [] } } } });
  ok(bad.status === 400 && /allOf/.test(bad.json?.error?.message), `responses text.format with allOf is a 400 (${bad.json?.error?.message})`);
}
// bad schemas: a 400 naming the parameter and the keyword, before any generation
for (const [what, body, param, word] of [
  ['$ref', { response_format: { type: 'json_schema', json_schema: { schema: { type: 'object', properties: { a: { $ref: '#/x' } } } } } }, 'response_format', '$ref'],
  ['an unknown type', { response_format: { type: 'json_schema', json_schema: { schema: { type: 'strin' } } } }, 'response_format', 'strin'],
  ['no schema', { response_format: { type: 'json_schema', json_schema: { name: 'x' } } }, 'response_format', 'schema'],
  ['an unknown format type', { response_format: { type: 'yaml' } }, 'response_format', 'json_schema'],
  ['a tool with a pattern', { tools: [{ type: 'function', function: { name: 'p', parameters: { type: 'object', properties: { s: { type: 'string', pattern: 'a+' } } } } }],
    tool_choice: { type: 'function', function: { name: 'p' } } }, 'tools', 'pattern'],
  ['an unknown tool', { tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice', 'nope'],
  ['a forced call with response_format', { tools, tool_choice: { type: 'function', function: { name: 'list' } },
    response_format: { type: 'json_object' } }, 'tool_choice', 'response_format'],
  ['tool parameters of a bad type', { tools: [{ type: 'function', function: { name: 'q', parameters: { type: 'object', properties: { n: { type: 'integer', minimum: 5, maximum: 2 } } } } }],
    tool_choice: 'required' }, 'tools', '#/properties/n'],
]) {
  const r = await post({ messages, ...body });
  ok(r.status === 400 && r.json?.error?.param === param && r.json.error.message.includes(word),
     `${what} is a 400 on '${param}' naming '${word}' (${r.status}: ${r.json?.error?.message})`);
}
process.exit(fails ? 1 : 0);
