// 20 schemas of different shapes, each forced as a named tool_choice through
// the official `openai` npm client; the call's arguments must validate with
// ajv (an independent JSON-schema validator, pinned in tests/node). Then
// tool_choice "required" over several tools whose parameters are all objects
// (alternatives that share their first bytes): one call of one of them,
// validating against that tool's schema, streamed and not.
// Called by tests/cli_serve_schemas20.sh: node serve_schemas20.mjs PART URL
import { createRequire } from 'node:module';

// the pinned packages of tests/node (scripts/fetch-openai-client.sh)
const require = createRequire(new URL('./node/', import.meta.url).pathname);
const OpenAI = require('openai').default;
const Ajv = require('ajv').default;

const [part, base] = process.argv.slice(2);
let fails = 0;
const ok = (cond, what) => { console.log((cond ? 'ok - ' : 'FAIL: ') + `${part}: ${what}`); if (!cond) fails++; };
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });

const str = (extra = {}) => ({ type: 'string', maxLength: 12, ...extra });
const schemas = {
  flat: { type: 'object', properties: { city: str(), days: { type: 'integer' }, metric: { type: 'boolean' } },
    required: ['city', 'days', 'metric'] },
  nested: { type: 'object', properties: { user: { type: 'object', properties: {
    name: str(), address: { type: 'object', properties: { street: str(), zip: { type: 'integer', minimum: 10000, maximum: 99999 } },
      required: ['street', 'zip'] } }, required: ['name', 'address'] } }, required: ['user'] },
  deep_optional: { type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'object', properties: {
    c: { type: 'integer', minimum: 0, maximum: 3 }, d: str() }, required: ['d'] }, e: { type: 'boolean' } } } }, required: ['a'] },
  string_list: { type: 'object', properties: { tags: { type: 'array', items: str({ maxLength: 6 }), minItems: 1, maxItems: 3 } },
    required: ['tags'] },
  object_list: { type: 'object', properties: { rows: { type: 'array', maxItems: 3, items: { type: 'object',
    properties: { id: { type: 'integer', minimum: 1, maximum: 99 }, label: str() }, required: ['id', 'label'] } } }, required: ['rows'] },
  enum_strings: { type: 'object', properties: { unit: { enum: ['celsius', 'fahrenheit', 'kelvin'] },
    level: { type: 'string', enum: ['low', 'lower', 'high'] } }, required: ['unit', 'level'] },
  enum_mixed: { type: 'object', properties: { v: { enum: ['auto', 1, 2.5, null, true] } }, required: ['v'] },
  int_bounds: { type: 'object', properties: { n: { type: 'integer', minimum: -3, maximum: 7 }, big: { type: 'integer', minimum: 1000, maximum: 1005 } },
    required: ['n', 'big'] },
  number_bounds: { type: 'object', properties: { x: { type: 'number', minimum: -1.5, maximum: 2.5 }, y: { type: 'number', minimum: 0, maximum: 100 } },
    required: ['x', 'y'] },
  exclusive: { type: 'object', properties: { p: { type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10 },
    q: { type: 'number', exclusiveMinimum: -1, exclusiveMaximum: 1 } }, required: ['p', 'q'] },
  all_optional: { type: 'object', properties: { a: str(), b: { type: 'integer', minimum: 0, maximum: 9 }, c: { type: 'boolean' } } },
  nullable: { type: 'object', properties: { note: { anyOf: [str(), { type: 'null' }] }, flag: { type: 'boolean' } },
    required: ['note', 'flag'] },
  anyof_kinds: { type: 'object', properties: { v: { anyOf: [str(), { type: 'integer', minimum: 0, maximum: 50 },
    { type: 'array', items: { type: 'boolean' }, maxItems: 2 }] } }, required: ['v'] },
  type_array: { type: 'object', properties: { t: { type: ['string', 'null'], maxLength: 5 }, u: { type: ['integer', 'boolean'] } },
    required: ['t', 'u'] },
  const_version: { type: 'object', properties: { version: { const: 'v1' }, body: str() }, required: ['version', 'body'] },
  string_lengths: { type: 'object', properties: { code: { type: 'string', minLength: 3, maxLength: 3 }, text: { type: 'string', minLength: 2, maxLength: 20 } },
    required: ['code', 'text'] },
  matrix: { type: 'object', properties: { m: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'array', minItems: 2, maxItems: 2,
    items: { type: 'integer', minimum: -9, maximum: 9 } } } }, required: ['m'] },
  free_object: { type: 'object', properties: { meta: { type: 'object' }, name: str() }, required: ['meta', 'name'] },
  odd_keys: { type: 'object', properties: { 'first name': str(), 'é': { type: 'integer', minimum: 0, maximum: 5 }, 'a"b': { type: 'null' } },
    required: ['first name', 'é', 'a"b'] },
  anyof_objects: { type: 'object', properties: { shape: { anyOf: [
    { type: 'object', properties: { kind: { const: 'circle' }, r: { type: 'number', minimum: 0, maximum: 10 } }, required: ['kind', 'r'] },
    { type: 'object', properties: { kind: { const: 'rect' }, w: { type: 'integer', minimum: 1, maximum: 9 }, h: { type: 'integer', minimum: 1, maximum: 9 } },
      required: ['kind', 'w', 'h'] }] } }, required: ['shape'] },
};
ok(Object.keys(schemas).length === 20, `${Object.keys(schemas).length} schemas`);
const tools = Object.entries(schemas).map(([name, parameters]) => ({ type: 'function', function: { name, description: `tool ${name}`, parameters } }));
const validators = Object.fromEntries(Object.entries(schemas).map(([k, s]) => [k, ajv.compile(s)]));
// the validator rejects what it should (so a pass below means something)
ok(!validators.int_bounds({ n: 8, big: 1000 }) && !validators.anyof_objects({ shape: { kind: 'rect', r: 1 } }) &&
   !validators.odd_keys({ 'first name': 'x', 'é': 1 }) && validators.enum_mixed({ v: null }), 'ajv rejects invalid arguments');
const messages = [{ role: 'user', content: 'Call the tool please.' }];

async function call(body, what) {
  let r;
  try { r = await client.chat.completions.create(body); } catch (e) { ok(false, `${what}: ${e.status} ${e.message}`); return null; }
  const ch = r.choices[0], calls = ch.message.tool_calls || [];
  if (calls.length !== 1 || ch.finish_reason !== 'tool_calls') {
    ok(false, `${what}: one call, finish_reason tool_calls (got ${calls.length}, ${ch.finish_reason}: ${ch.message.content})`);
    return null;
  }
  let args;
  try { args = JSON.parse(calls[0].function.arguments); } catch { ok(false, `${what}: arguments are JSON: ${calls[0].function.arguments}`); return null; }
  return { name: calls[0].function.name, args };
}

// named tool_choice: every schema, its own seed
let valid = 0, i = 0;
for (const [name, schema] of Object.entries(schemas)) {
  i++;
  const c = await call({ model: 'lmq', messages, tools, tool_choice: { type: 'function', function: { name } }, seed: 100 + i, temperature: 1 },
                       `tool_choice ${name}`);
  if (!c) continue;
  const v = c.name === name && validators[name](c.args);
  if (v) valid++;
  ok(v, `tool_choice ${name}: ${JSON.stringify(c.args)} ${v ? 'valid' : ajv.errorsText(validators[name].errors) + ` (name ${c.name})`}`);
  void schema;
}
ok(valid === 20, `${valid}/20 schemas valid`);

// "required" with several tools: any one of them, valid against its own schema
const pick = ['flat', 'nested', 'enum_strings', 'int_bounds', 'anyof_objects', 'string_list'];
const some = tools.filter((t) => pick.includes(t.function.name));
const seen = new Set();
for (let seed = 1; seed <= 8; seed++) {
  const c = await call({ model: 'lmq', messages, tools: some, tool_choice: 'required', seed, temperature: 1 }, `required seed ${seed}`);
  if (!c) continue;
  seen.add(c.name);
  const v = pick.includes(c.name) && validators[c.name](c.args);
  ok(v, `required seed ${seed}: ${c.name} ${JSON.stringify(c.args)} ${v ? 'valid' : ajv.errorsText(validators[c.name]?.errors)}`);
}
ok(seen.size >= 2, `required: the calls pick different tools over the seeds (${[...seen].join(', ')})`);
// streamed: the deltas of the one call merge into a valid call
{
  let name = '', args = '', finish = null, n = 0;
  try {
    const stream = await client.chat.completions.create({ model: 'lmq', messages, tools: some, tool_choice: 'required', seed: 11, stream: true });
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      for (const tc of ch?.delta?.tool_calls || []) { if (tc.function?.name) { name = tc.function.name; n++; } args += tc.function?.arguments || ''; }
      if (ch?.finish_reason) finish = ch.finish_reason;
    }
  } catch (e) { ok(false, `required streamed: ${e.message}`); }
  let a = null; try { a = JSON.parse(args); } catch {}
  ok(n === 1 && finish === 'tool_calls' && pick.includes(name) && a !== null && validators[name](a),
     `required streamed: one call ${name} ${args} (finish ${finish})`);
}
process.exit(fails ? 1 : 0);
