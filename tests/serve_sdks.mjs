// Agent frameworks against `lmq serve` (pinned in tests/node/package.json):
// the Vercel AI SDK (`ai` + `@ai-sdk/openai-compatible`) running generateText
// with a tool and a two-step limit over /v1/chat/completions, and the OpenAI
// Agents SDK running an agent with one function tool over /v1/responses.
// llama-8m does not choose tools, so each run ends in its first step with a
// text answer; what is checked is that both frameworks accept every
// request and answer shape end to end. Called by tests/cli_serve_agents.sh:
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
  check('AI SDK: generateText with a tool runs to completion', typeof r.text === 'string' && r.steps.length >= 1 && r.steps.length <= 2 &&
    ['stop', 'length', 'tool-calls'].includes(r.finishReason), { text: r.text, steps: r.steps.length, finish: r.finishReason });
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
  const s = await agents.run(agent, 'What is the weather in Paris?', { stream: true });
  let t = '';
  for await (const chunk of s.toTextStream()) t += chunk;
  await s.completed;
  check('Agents SDK: streamed run', typeof s.finalOutput === 'string' && t === s.finalOutput, { t, out: s.finalOutput });
});
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
