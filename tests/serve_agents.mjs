// `lmq serve` features for agents, driven with the official OpenAI client:
// logprobs (chat and completions), n > 1, seeds, usage, reasoning_content
// from <think> templates, chat_template_kwargs. Called by
// tests/cli_serve_agents.sh with:
//   node serve_agents.mjs PART BASE_URL
// PART: "core" (llama-8m with its own template), "think-open" (a template
// whose generation prompt opens <think>: DeepSeek-R1-Distill-Qwen), "qwen3"
// (Qwen3's template: enable_thinking). Prints one line per check; exits 1 on
// any failure.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let OpenAI;
try {
  OpenAI = (await import(require.resolve('openai', { paths: [new URL('./node/', import.meta.url).pathname] }))).default;
} catch (e) {
  console.log('FAIL: the openai client is not installed (run scripts/fetch-openai-client.sh): ' + e.message);
  process.exit(1);
}
const [part, base] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'none', maxRetries: 0, timeout: 120000 });
let failed = 0, passed = 0;
function check(name, ok, detail) {
  if (ok) { passed++; console.log('ok - ' + name); }
  else { failed++; console.log('FAIL: ' + name + (detail !== undefined ? ' :: ' + JSON.stringify(detail).slice(0, 800) : '')); }
}
async function attempt(name, fn) {
  try { await fn(); } catch (e) { check(name + ' (threw ' + (e.status ?? '') + ' ' + e.message + ')', false); }
}
async function expectError(name, param, fn) {
  try { await fn(); check(name + ': expected HTTP 400', false); }
  catch (e) { check(name, e.status === 400 && (param === undefined || e.param === param), { status: e.status, param: e.param, msg: e.message }); }
}
const msgs = [{ role: 'user', content: 'Tell me about the sea.' }];
const collect = async (stream) => {
  const by = {};
  let usage = null;
  for await (const ch of stream) {
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      const b = (by[c.index] ??= { content: '', reasoning: '', lp: [], finish: null, roles: 0 });
      if (c.delta?.role) b.roles++;
      if (c.delta?.content) b.content += c.delta.content;
      if (c.delta?.reasoning_content) b.reasoning += c.delta.reasoning_content;
      if (c.logprobs?.content) b.lp.push(...c.logprobs.content);
      if (c.finish_reason) b.finish = c.finish_reason;
    }
  }
  return { by, usage };
};

if (part === 'core') {
  await attempt('chat logprobs', async () => {
    const r = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 3 });
    const c = r.choices[0], lp = c.logprobs?.content ?? [];
    check('one logprobs entry per generated token', lp.length === r.usage.completion_tokens, { n: lp.length, usage: r.usage });
    check('the tokens spell the content', lp.map((e) => e.token).join('') === c.message.content, { lp: lp.map((e) => e.token), content: c.message.content });
    check('bytes are the token\'s UTF-8', lp.every((e) => Buffer.from(e.bytes).toString('utf8') === e.token));
    check('3 alternatives each, best first',
      lp.every((e) => e.top_logprobs.length === 3 && e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob));
    check('greedy: the chosen token is the best alternative',
      lp.every((e) => e.top_logprobs[0].token === e.token && Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6), lp[0]);
    check('log-probabilities are <= 0 and their mass <= 1',
      lp.every((e) => e.logprob <= 0 && e.top_logprobs.reduce((a, t) => a + Math.exp(t.logprob), 0) <= 1 + 1e-6));
    const s = await collect(await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 3, stream: true }));
    check('streamed logprobs equal the non-streamed ones', JSON.stringify(s.by[0].lp) === JSON.stringify(lp), { s: s.by[0].lp.length, n: lp.length });
    const off = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 4 });
    check('no logprobs unless asked', off.choices[0].logprobs === null);
  });
  await attempt('completions logprobs', async () => {
    const r = await client.completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 2 });
    const l = r.choices[0].logprobs;
    check('completions: tokens spell the text', l.tokens.join('') === r.choices[0].text, l);
    check('completions: parallel lists', l.token_logprobs.length === l.tokens.length && l.top_logprobs.length === l.tokens.length && l.text_offset.length === l.tokens.length);
    check('completions: the greedy token leads its top_logprobs',
      l.tokens.every((t, i) => Object.keys(l.top_logprobs[i]).length <= 2 && Math.abs(Math.max(...Object.values(l.top_logprobs[i])) - l.token_logprobs[i]) < 1e-6));
  });
  await attempt('n > 1 and seeds', async () => {
    const a = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 16, n: 3, seed: 11 });
    const b = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 16, n: 3, seed: 11 });
    const one = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 16, seed: 11 });
    check('n=3 gives choices 0, 1, 2', a.choices.map((c) => c.index).join() === '0,1,2');
    check('the same seed reproduces all choices', JSON.stringify(a.choices) === JSON.stringify(b.choices));
    check('choice 0 equals the n=1 reply with that seed', a.choices[0].message.content === one.choices[0].message.content);
    check('choices differ from each other', new Set(a.choices.map((c) => c.message.content)).size > 1, a.choices.map((c) => c.message.content));
    check('usage counts every choice\'s tokens', a.usage.completion_tokens === 48 && a.usage.total_tokens === a.usage.prompt_tokens + 48, a.usage);
    /* b followed a with the same prompt: all of it but the last token came from the cache */
    check('cached prompt tokens reported', b.usage.prompt_tokens_details.cached_tokens === b.usage.prompt_tokens - 1, b.usage);
    const s = await collect(await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 16, n: 3, seed: 11, stream: true, stream_options: { include_usage: true } }));
    check('streamed n=3 equals the non-streamed choices', [0, 1, 2].every((i) => s.by[i].content === a.choices[i].message.content && s.by[i].finish === a.choices[i].finish_reason && s.by[i].roles === 1), s.by);
    check('streamed usage counts every choice', s.usage?.completion_tokens === 48, s.usage);
    const c = await client.completions.create({ model: 'm', prompt: 'The sea', max_tokens: 8, n: 2, seed: 5 });
    check('completions n=2', c.choices.length === 2 && c.choices[1].index === 1 && c.usage.completion_tokens === 16, c);
  });
  await expectError('n above the limit', 'n', () => client.chat.completions.create({ model: 'm', messages: msgs, n: 9 }));
  await expectError('top_logprobs above 20', 'top_logprobs', () => client.chat.completions.create({ model: 'm', messages: msgs, logprobs: true, top_logprobs: 21 }));
  await expectError('top_logprobs without logprobs', 'top_logprobs', () => client.chat.completions.create({ model: 'm', messages: msgs, top_logprobs: 2 }));
  await expectError('chat_template_kwargs not an object', 'chat_template_kwargs', () => client.chat.completions.create({ model: 'm', messages: msgs, chat_template_kwargs: [1] }));
  await expectError('unknown reasoning_effort', 'reasoning_effort', () => client.chat.completions.create({ model: 'm', messages: msgs, reasoning_effort: 'extreme' }));
} else if (part === 'think-open') {
  await attempt('reasoning inside an open <think>', async () => {
    const r = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 24, temperature: 0 });
    const m = r.choices[0].message;
    check('everything before </think> is reasoning_content', m.reasoning_content?.length > 0 && m.content === '', m);
    const s = await collect(await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 24, temperature: 0, stream: true }));
    check('streamed reasoning deltas join to reasoning_content', s.by[0].reasoning === m.reasoning_content && s.by[0].content === '', s.by[0]);
    /* the assistant's reasoning in the history is accepted (the template drops it) */
    const h = await client.chat.completions.create({ model: 'm', max_tokens: 4, temperature: 0,
      messages: [...msgs, { role: 'assistant', content: 'It is big.', reasoning_content: 'thinking' }, { role: 'user', content: 'More?' }] });
    check('history with reasoning_content', h.choices[0].finish_reason === 'length');
  });
} else if (part === 'qwen3') {
  await attempt('enable_thinking', async () => {
    const on = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 12, temperature: 0 });
    const off = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 12, temperature: 0, chat_template_kwargs: { enable_thinking: false } });
    /* the template adds "<think>\n\n</think>\n\n" when thinking is off */
    check('chat_template_kwargs reach the template', off.usage.prompt_tokens > on.usage.prompt_tokens, { on: on.usage, off: off.usage });
    check('thinking off: all content, no reasoning', off.choices[0].message.content.length > 0 && !off.choices[0].message.reasoning_content, off.choices[0]);
    check('an answer without <think> is content', on.choices[0].message.content.length > 0 && !on.choices[0].message.reasoning_content, on.choices[0]);
  });
}

// tools: rendered by the template (Qwen2.5) or described by lmq (llama-8m's
// llama2-style template), history with calls and results, bad input
if (part === 'core' || part === 'tools') {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Current weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  const hist = [{ role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: '21 C, sunny' }];
  await attempt('tools', async () => {
    const plain = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 2 });
    const withTools = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 2, tools });
    check('tools reach the prompt', withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 20, [plain.usage, withTools.usage]);
    const none = await client.chat.completions.create({ model: 'm', messages: msgs, max_tokens: 2, tools, tool_choice: 'none' });
    check('tool_choice none leaves them out', none.usage.prompt_tokens === plain.usage.prompt_tokens, none.usage);
    const h = await client.chat.completions.create({ model: 'm', messages: hist, max_tokens: 4, tools });
    check('a history with a call and its result', h.usage.prompt_tokens > withTools.usage.prompt_tokens && ['stop', 'length', 'tool_calls'].includes(h.choices[0].finish_reason), h);
    const hs = await collect(await client.chat.completions.create({ model: 'm', messages: hist, max_tokens: 4, tools, stream: true, parallel_tool_calls: false }));
    check('streamed with tools', hs.by[0].finish !== null, hs.by[0]);
  });
  await expectError('a call of a tool not in tools', 'messages', () => client.chat.completions.create({ model: 'm', messages: hist, tools: [{ type: 'function', function: { name: 'other' } }] }));
  await expectError('a tool result for no call', 'messages', () => client.chat.completions.create({ model: 'm', tools,
    messages: [{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'nope', content: '1' }] }));
  await expectError('arguments that are not a JSON object', 'messages', () => client.chat.completions.create({ model: 'm', tools,
    messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'get_weather', arguments: '{bad' } }] }] }));
  await expectError('a malformed tool', 'tools', () => client.chat.completions.create({ model: 'm', messages: msgs, tools: [{ type: 'function', function: { name: '' } }] }));
  await expectError('a tool defined twice', 'tools', () => client.chat.completions.create({ model: 'm', messages: msgs, tools: [tools[0], tools[0]] }));
  await expectError('tool_choice naming an unknown tool', 'tool_choice', () => client.chat.completions.create({ model: 'm', messages: msgs, tools, tool_choice: { type: 'function', function: { name: 'nope' } } }));
  await expectError('tool_choice of a bad shape', 'tool_choice', () => client.chat.completions.create({ model: 'm', messages: msgs, tools, tool_choice: 'sometimes' }));
  const h = await (await fetch(base + '/health')).json();
  check('no slot leaked by the refusals', h.slots_idle === h.slots_total, h);
}

// the Responses API
if (part === 'core') {
  await attempt('responses', async () => {
    const r1 = await client.responses.create({ model: 'm', input: 'Tell me about the sea.', instructions: 'Be brief.', max_output_tokens: 12, temperature: 0 });
    check('responses: a message with output_text', r1.object === 'response' && r1.output[0]?.type === 'message' && typeof r1.output_text === 'string' && r1.output_text.length > 0, r1);
    check('responses: usage', r1.usage.output_tokens === 12 && r1.usage.total_tokens === r1.usage.input_tokens + 12 && r1.status === 'incomplete', r1.usage);
    const chat = await client.chat.completions.create({ model: 'm', max_tokens: 12, temperature: 0,
      messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Tell me about the sea.' }] });
    check('responses: the same text as the chat request it means', r1.output_text === chat.choices[0].message.content, [r1.output_text, chat.choices[0].message.content]);
    const r2 = await client.responses.create({ model: 'm', input: 'And the sky?', previous_response_id: r1.id, max_output_tokens: 6, temperature: 0 });
    check('previous_response_id continues the conversation (its prompt is cached)',
      r2.previous_response_id === r1.id && r2.usage.input_tokens > r1.usage.input_tokens && r2.usage.input_tokens_details.cached_tokens >= r1.usage.input_tokens - 1, r2.usage);
    const events = [];
    let text = '';
    const st = await client.responses.create({ model: 'm', input: 'Tell me about the sea.', instructions: 'Be brief.', max_output_tokens: 12, temperature: 0, stream: true });
    let done = null;
    for await (const ev of st) {
      events.push(ev.type);
      if (ev.type === 'response.output_text.delta') text += ev.delta;
      if (ev.type === 'response.completed') done = ev.response;
    }
    check('responses stream: created first, completed last, numbered', events[0] === 'response.created' && events.at(-1) === 'response.completed', events);
    check('responses stream: deltas join to the final text', text === r1.output_text && done?.output?.[0]?.content?.[0]?.text === text, [text, r1.output_text]);
    const tools = [{ type: 'function', name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
    const r3 = await client.responses.create({ model: 'm', max_output_tokens: 4, tools, input: [
      { role: 'user', content: 'Weather in Paris?' },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'call_1', output: '21 C' }] });
    check('responses: function tools and call history', r3.status === 'incomplete' || r3.status === 'completed', r3);
  });
  await expectError('responses: unknown previous_response_id', 'previous_response_id', () => client.responses.create({ model: 'm', input: 'x', previous_response_id: 'resp_nope' }));
  await expectError('responses: a non-function tool', 'tools', () => client.responses.create({ model: 'm', input: 'x', tools: [{ type: 'web_search' }] }));
  await expectError('responses: an output for no call', 'messages', () => client.responses.create({ model: 'm', tools: [{ type: 'function', name: 'f', parameters: { type: 'object' } }],
    input: [{ role: 'user', content: 'x' }, { type: 'function_call_output', call_id: 'zz', output: '1' }] }));
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
