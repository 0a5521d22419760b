// Drives a running `lmq serve` with the official OpenAI client (pinned in
// tests/node/package.json). Called by tests/cli_serve.sh with:
//   node serve_client.mjs BASE_URL API_KEY ALIAS EXPECT_CHAT_FILE EXPECT_COMPLETION_FILE
// The expect files hold `lmq run --temp 0` output on the same rendered prompt.
// Prints one line per check; exits 1 if any failed.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let OpenAI;
try {
  OpenAI = (await import(require.resolve('openai', { paths: [new URL('./node/', import.meta.url).pathname] }))).default;
} catch (e) {
  console.log('FAIL: the openai client is not installed (run scripts/fetch-openai-client.sh): ' + e.message);
  process.exit(1);
}
const [base, key, alias, expectChatFile, expectCmplFile] = process.argv.slice(2);
const expectChat = readFileSync(expectChatFile, 'utf8');
const expectCmpl = readFileSync(expectCmplFile, 'utf8');
const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 60000 });

let failed = 0, passed = 0;
function check(name, ok, detail) {
  if (ok) { passed++; console.log('ok - ' + name); }
  else { failed++; console.log('FAIL: ' + name + (detail !== undefined ? ' :: ' + JSON.stringify(detail).slice(0, 600) : '')); }
}
async function attempt(name, fn) {
  try { await fn(); } catch (e) { check(name + ' (threw ' + (e.status ?? '') + ' ' + e.message + ')', false); }
}
async function expectError(name, status, code, fn) {
  try { await fn(); check(name + ': expected HTTP ' + status, false); }
  catch (e) { check(name, e.status === status && (code === undefined || e.code === code), { status: e.status, code: e.code, msg: e.message }); }
}
const health = async () => (await fetch(base + '/health', { headers: { Authorization: 'Bearer ' + key } })).json();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const hello = [{ role: 'user', content: 'Hello, who are you?' }];

await attempt('models', async () => {
  const list = await client.models.list();
  check('GET /v1/models lists the alias', list.data.length === 1 && list.data[0].id === alias, list.data);
});

let greedy = '';
await attempt('chat', async () => {
  const r = await client.chat.completions.create({ model: alias, messages: hello, temperature: 0, max_tokens: 24 });
  greedy = r.choices[0].message.content;
  check('non-streamed chat: assistant message, usage, finish_reason',
    r.object === 'chat.completion' && r.model === alias && r.choices[0].message.role === 'assistant' &&
    greedy.length > 0 && r.usage.completion_tokens === 24 && r.usage.prompt_tokens > 0 &&
    r.usage.total_tokens === r.usage.prompt_tokens + 24 && r.choices[0].finish_reason === 'length', r);
  check('greedy chat equals `lmq run` on the rendered prompt', greedy === expectChat, { got: greedy, want: expectChat });
});

await attempt('stream', async () => {
  const s = await client.chat.completions.create({ model: alias, messages: hello, temperature: 0, max_tokens: 24,
    stream: true, stream_options: { include_usage: true } });
  let text = '', chunks = 0, role = null, finish = null, usage = null;
  for await (const c of s) {
    chunks++;
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      if (ch.delta.role) role = ch.delta.role;
      if (ch.delta.content) text += ch.delta.content;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  check('streamed chat: role, deltas, finish_reason, usage chunk',
    role === 'assistant' && chunks > 3 && finish === 'length' && usage && usage.completion_tokens === 24, { chunks, role, finish, usage });
  check('streamed chat text equals the non-streamed greedy text', text === greedy, { text, greedy });
});

await attempt('completions', async () => {
  const r = await client.completions.create({ model: alias, prompt: 'Once upon a time', temperature: 0, max_tokens: 24 });
  check('greedy /v1/completions equals `lmq run`', r.object === 'text_completion' && r.choices[0].text === expectCmpl,
    { got: r.choices[0].text, want: expectCmpl });
  const s = await client.completions.create({ model: alias, prompt: 'Once upon a time', temperature: 0, max_tokens: 24, stream: true });
  let text = '';
  for await (const c of s) text += c.choices[0]?.text ?? '';
  check('streamed /v1/completions equals the non-streamed text', text === expectCmpl, { text });
});

await attempt('stop', async () => {
  // a stop string taken from inside the greedy reply: the reply ends just before it
  const words = greedy.split(/\s+/).filter((w) => w.length >= 3);
  const stop = words.length > 1 ? words[1] : greedy.slice(4, 7);
  const cut = greedy.slice(0, greedy.indexOf(stop));
  const r = await client.chat.completions.create({ model: alias, messages: hello, temperature: 0, max_tokens: 24, stop: [stop, 'zzzz-never'] });
  check('stop string ends the reply before it, finish_reason stop', r.choices[0].message.content === cut && r.choices[0].finish_reason === 'stop',
    { stop, got: r.choices[0].message.content, want: cut });
  const s = await client.chat.completions.create({ model: alias, messages: hello, temperature: 0, max_tokens: 24, stop, stream: true });
  let text = '';
  for await (const c of s) text += c.choices[0]?.delta?.content ?? '';
  check('stop string in a stream', text === cut, { text, cut });
});

await attempt('seed', async () => {
  const ask = async (seed) => (await client.chat.completions.create({ model: alias, messages: [{ role: 'user', content: 'Tell me a story.' }],
    temperature: 1, top_p: 0.95, max_tokens: 48, seed })).choices[0].message.content;
  const a = await ask(1234), b = await ask(1234);
  const others = [await ask(1), await ask(2), await ask(3)];
  check('same seed, same reply', a === b, { a, b });
  check('other seeds give other replies', others.some((o) => o !== a), { a, others });
});

await attempt('penalties', async () => {
  const r = await client.chat.completions.create({ model: alias, messages: hello, temperature: 0, max_tokens: 24,
    presence_penalty: 1.5, frequency_penalty: 1.5 });
  check('presence/frequency penalties accepted and change the greedy reply', r.choices[0].message.content !== greedy, r.choices[0].message.content);
});

await attempt('prefix', async () => {
  // a growing conversation: the second turn reuses the first turn's prompt from the slot's cache
  const conv = [{ role: 'user', content: 'Tell me about the old city walls.' }];
  const r1 = await client.chat.completions.create({ model: alias, messages: conv, temperature: 0, max_tokens: 16 });
  conv.push({ role: 'assistant', content: r1.choices[0].message.content.trim() || 'Yes.' }, { role: 'user', content: 'And the gates?' });
  const r2 = await client.chat.completions.create({ model: alias, messages: conv, temperature: 0, max_tokens: 16 });
  const cached = r2.usage.prompt_tokens_details?.cached_tokens ?? 0;
  check('the next turn of a conversation re-evaluates only the new part', cached >= r1.usage.prompt_tokens - 1 && cached < r2.usage.prompt_tokens,
    { first: r1.usage, second: r2.usage });
});

await attempt('concurrent', async () => {
  const prompts = ['Tell me about the sea.', 'What is a river?'];
  const solo = [];
  for (const p of prompts)
    solo.push((await client.chat.completions.create({ model: alias, messages: [{ role: 'user', content: p }], temperature: 0, max_tokens: 64 })).choices[0].message.content);
  const t0 = Date.now();
  let overlap = false;
  const run = async (p) => {
    const s = await client.chat.completions.create({ model: alias, messages: [{ role: 'user', content: p }], temperature: 0, max_tokens: 64, stream: true });
    let text = '';
    for await (const c of s) {
      text += c.choices[0]?.delta?.content ?? '';
      if (!overlap) { const h = await health(); if (h.slots_idle === 0) overlap = true; }
    }
    return text;
  };
  const both = await Promise.all(prompts.map(run));
  check('two concurrent streams each equal their solo reply', both[0] === solo[0] && both[1] === solo[1], { both, solo });
  check('both slots were busy at once', overlap, { ms: Date.now() - t0 });
});

await attempt('disconnect', async () => {
  const before = await health();
  const ac = new AbortController();
  const s = await client.chat.completions.create({ model: alias, messages: hello, temperature: 1, seed: 5, stream: true }, { signal: ac.signal });
  let n = 0;
  try { for await (const c of s) { if (++n === 3) ac.abort(); } } catch (e) { /* aborted */ }
  let h = await health();
  for (let i = 0; i < 100 && (h.slots_idle !== h.slots_total || h.requests_cancelled === before.requests_cancelled); i++) { await sleep(10); h = await health(); }
  check('a client leaving mid-stream frees its slot (counted as cancelled)',
    h.slots_idle === h.slots_total && h.requests_cancelled === before.requests_cancelled + 1, { before, after: h });
  const r = await client.chat.completions.create({ model: alias, messages: hello, temperature: 0, max_tokens: 24 });
  check('a new request after the disconnect succeeds', r.choices[0].message.content === greedy);
});

await attempt('queue', async () => {
  // more streams than slots + queue: some get 429, the rest complete, nothing leaks
  const N = 40;
  const results = await Promise.allSettled(Array.from({ length: N }, (_, i) =>
    client.chat.completions.create({ model: alias, messages: [{ role: 'user', content: 'Story ' + i }], temperature: 1, seed: i, max_tokens: 200 })));
  const ok = results.filter((r) => r.status === 'fulfilled').length;
  const limited = results.filter((r) => r.status === 'rejected' && r.reason.status === 429).length;
  const other = results.filter((r) => r.status === 'rejected' && r.reason.status !== 429).map((r) => r.reason.message);
  check('requests beyond slots + queue get 429, the others complete', ok > 0 && limited > 0 && ok + limited === N, { ok, limited, other });
  const h = await health();
  check('no slot leaked after the burst', h.slots_idle === h.slots_total && h.queue === 0, h);
});

await attempt('mutations', async () => {
  // every field of a valid request replaced by values of every JSON type:
  // each answer is 200 or a 400 in OpenAI's error shape, and the server lives
  const nested = (d) => (d ? [nested(d - 1)] : 1);
  const values = [null, true, false, 0, -1, 1e308, -1e308, 1.5, '', 'x', 'A'.repeat(10000), [], [1], ['a', 'b'], {}, { a: 1 }, nested(2000)];
  const valid = () => ({ model: alias, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, temperature: 0 });
  const paths = [['model'], ['messages'], ['messages', 0], ['messages', 0, 'role'], ['messages', 0, 'content'], ['temperature'],
    ['top_p'], ['max_tokens'], ['max_completion_tokens'], ['stop'], ['seed'], ['stream'], ['stream_options'],
    ['n'], ['presence_penalty'], ['frequency_penalty'], ['prompt']];
  const bad = [];
  let n = 0;
  for (const path of paths) for (const v of values) for (const ep of ['chat/completions', 'completions']) {
    const body = valid();
    if (ep === 'completions') { delete body.messages; body.prompt = 'Hi'; }
    let o = body;
    for (const k of path.slice(0, -1)) o = o?.[k];
    if (o === undefined || o === null || typeof o !== 'object') continue;
    o[path[path.length - 1]] = v;
    if (path[0] === 'max_tokens' && (v === null)) body.max_completion_tokens = 2;
    const r = await fetch(`${base}/v1/${ep}`, { method: 'POST', headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const text = await r.text();
    n++;
    const shaped = r.status === 200 || (r.status === 400 && /^\{"error":\{"message":/.test(text));
    if (!shaped) bad.push({ ep, path, v: JSON.stringify(v).slice(0, 40), status: r.status, text: text.slice(0, 200) });
  }
  check(`${n} mutated requests each get 200 or a 400 error object`, bad.length === 0, bad.slice(0, 5));
  const h = await health();
  check('the server is healthy after the mutations, no slot held', h.status === 'ok' && h.slots_idle === h.slots_total, h);
});

await expectError('max_tokens beyond the context: 400 context_length_exceeded', 400, 'context_length_exceeded',
  () => client.chat.completions.create({ model: alias, messages: hello, max_tokens: 100000 }));
await expectError('prompt longer than the context: 400 context_length_exceeded', 400, 'context_length_exceeded',
  () => client.chat.completions.create({ model: alias, messages: [{ role: 'user', content: 'word '.repeat(3000) }] }));
await expectError('temperature of the wrong type: 400', 400, undefined,
  () => client.chat.completions.create({ model: alias, messages: hello, temperature: 'hot' }));
await expectError('wrong API key: 401', 401, 'invalid_api_key',
  () => new OpenAI({ baseURL: base + '/v1', apiKey: 'wrong', maxRetries: 0 }).chat.completions.create({ model: alias, messages: hello }));

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
