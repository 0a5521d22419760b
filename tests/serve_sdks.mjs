// Agent frameworks against `lmq serve` (pinned in tests/node/package.json):
// the Vercel AI SDK (`ai` + `@ai-sdk/openai-compatible`) running generateText
// with a tool and a two-step limit over /v1/chat/completions, and the OpenAI
// Agents SDK running an agent with one function tool over /v1/responses.
// A small model does not choose tools by itself, so the loops force the
// first call (tool_choice naming the tool: the server's constrained
// decoding writes a valid call) and then let the model answer: the AI SDK
// with prepareStep (step 1 the named tool, step 2 "none"), the Agents SDK
// with modelSettings.toolChoice (reset after the call, its default). Both
// must run the tool once with valid arguments, send its result back and end
// with a text answer. Called by tests/cli_serve_agents.sh:
//   node serve_sdks.mjs BASE_URL
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const from = (name) => require.resolve(name, { paths: [new URL('./node/', import.meta.url).pathname] });
const [base] = process.argv.slice(2);
let failed = 0, passed = 0;
function check(name, ok, detail) {
  if (ok) { passed++; console.log('ok - ' + name); }
  else { failed++; console.log('FAIL: ' + name + (detail !== undefined ? ' :: ' + JSON.stringify(detail).slice(0, 800) : '')); }
}
async function attempt(name, fn) {
  try { await fn(); } catch (e) { check(name + ' (threw ' + (e.status ?? '') + ' ' + e.message + ')', false, String(e.stack).slice(0, 600)); }
}
let ai, compat, agents, z, OpenAI;
try {
  ai = await import(from('ai'));
  compat = await import(from('@ai-sdk/openai-compatible'));
  agents = await import(from('@openai/agents'));
  z = (await import(from('zod'))).z;
  OpenAI = (await import(from('openai'))).default;
} catch (e) {
  console.log('FAIL: the SDKs are not installed (run scripts/fetch-openai-client.sh): ' + e.message);
  process.exit(1);
}

await attempt('Vercel AI SDK', async () => {
  const lmq = compat.createOpenAICompatible({ name: 'lmq', baseURL: base + '/v1', apiKey: 'none' });
  let called = 0;
  const r = await ai.generateText({
    model: lmq('m'), prompt: 'What is the weather in Paris?', maxOutputTokens: 16, temperature: 0,
    tools: { get_weather: ai.tool({ description: 'Weather of a city', inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => { called++; return { city, temp: 21 }; } }) },
    stopWhen: ai.stepCountIs(2),
  });
  check('AI SDK: generateText with a tool (model\'s choice) runs to completion', typeof r.text === 'string' && r.steps.length >= 1 && r.steps.length <= 2 &&
    ['stop', 'length', 'tool-calls'].includes(r.finishReason), { text: r.text, steps: r.steps.length, finish: r.finishReason });
  /* the two-step loop: a forced call, the tool runs, its result goes back, the model answers */
  const seen = [], bodies = [];
  const rec = compat.createOpenAICompatible({ name: 'lmq', baseURL: base + '/v1', apiKey: 'none',
    fetch: async (url, init) => { bodies.push(String(init.body)); return fetch(url, init); } });
  const r2 = await ai.generateText({
    /* a forced call cut by the token limit is no call: room for it, a bounded string */
    model: rec('m'), prompt: 'What is the weather in Paris?', maxOutputTokens: 96, temperature: 0,
    tools: { get_weather: ai.tool({ description: 'Weather of a city', inputSchema: z.object({ city: z.string().max(24) }),
      execute: async ({ city }) => { seen.push(city); return { city, temp: 21 }; } }) },
    prepareStep: async ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? { type: 'tool', toolName: 'get_weather' } : 'none' }),
    stopWhen: ai.stepCountIs(2),
  });
  const s0 = r2.steps[0], s1 = r2.steps[1];
  /* what step 2 sent: the history with the call and the tool's result */
  const body1 = bodies.length === 2 ? bodies[1] : '';
  check('AI SDK: two-step tool loop: step 1 calls get_weather with a string city, the tool runs once',
    r2.steps.length === 2 && s0.finishReason === 'tool-calls' && s0.toolCalls.length === 1 &&
    s0.toolCalls[0].toolName === 'get_weather' && seen.length === 1 && typeof seen[0] === 'string' &&
    s0.toolResults.length === 1 && s0.toolResults[0].output.temp === 21,
    { steps: r2.steps.length, finish0: s0 && s0.finishReason, calls: s0 && s0.toolCalls, seen });
  check('AI SDK: two-step tool loop: step 2 answers in text after the tool result',
    s1 !== undefined && s1.toolCalls.length === 0 && ['stop', 'length'].includes(s1.finishReason) &&
    typeof r2.text === 'string' && r2.text === s1.text && /"role":\s*"tool"/.test(body1) && body1.includes('"temp\\":21'),
    { finish1: s1 && s1.finishReason, text: r2.text, requests: bodies.length, body1: body1.slice(-400) });
  check('AI SDK: usage is read', r.usage.outputTokens > 0 && r.usage.inputTokens > 0, r.usage);
  const s = ai.streamText({ model: lmq('m'), prompt: 'What is the weather in Paris?', maxOutputTokens: 16, temperature: 0 });
  let t = '';
  for await (const d of s.textStream) t += d;
  check('AI SDK: streamText equals generateText', t === (await ai.generateText({ model: lmq('m'), prompt: 'What is the weather in Paris?', maxOutputTokens: 16, temperature: 0 })).text, t);
});

await attempt('OpenAI Agents SDK', async () => {
  agents.setDefaultOpenAIClient(new OpenAI({ baseURL: base + '/v1', apiKey: 'none' }));
  agents.setOpenAIAPI('responses');
  agents.setTracingDisabled(true);
  const getWeather = agents.tool({ name: 'get_weather', description: 'Weather of a city',
    parameters: z.object({ city: z.string() }), execute: async ({ city }) => `21 C in ${city}` });
  const agent = new agents.Agent({ name: 'weather', instructions: 'Answer briefly.', model: 'm', tools: [getWeather],
    modelSettings: { maxTokens: 400, temperature: 0,
      /* llama-8m seldom ends a turn by itself; the stop string (an lmq
       * extension of /v1/responses) ends it as "completed" */
      providerData: { stop: ['.'] } } });
  const r = await agents.run(agent, 'What is the weather in Paris?');
  check('Agents SDK: an agent with a function tool runs over /v1/responses', typeof r.finalOutput === 'string', { out: r.finalOutput });
  /* the tool loop: the first turn forced to call get_weather (reset to auto after it) */
  const cities = [];
  const forcedTool = agents.tool({ name: 'get_weather', description: 'Weather of a city',
    parameters: z.object({ city: z.string() }), execute: async ({ city }) => { cities.push(city); return `21 C in ${city}`; } });
  const forced = new agents.Agent({ name: 'weather', instructions: 'Answer briefly.', model: 'm', tools: [forcedTool],
    modelSettings: { maxTokens: 400, temperature: 0, toolChoice: 'get_weather', providerData: { stop: ['.'] } } });
  const rf = await agents.run(forced, 'What is the weather in Paris?', { maxTurns: 4 });
  const items = rf.newItems.map((i) => i.type);
  check('Agents SDK: tool loop: the forced call runs the tool once, its output goes back, the agent answers',
    cities.length === 1 && typeof cities[0] === 'string' && items.includes('tool_call_item') &&
    items.includes('tool_call_output_item') && typeof rf.finalOutput === 'string',
    { cities, items, out: rf.finalOutput });
  const s = await agents.run(agent, 'What is the weather in Paris?', { stream: true });
  let t = '';
  for await (const chunk of s.toTextStream()) t += chunk;
  await s.completed;
  check('Agents SDK: streamed run', typeof s.finalOutput === 'string' && t === s.finalOutput, { t, out: s.finalOutput });
});
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
