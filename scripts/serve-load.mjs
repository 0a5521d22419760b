// Bounded load test for `lmq serve` on loopback: N clients, each sending M
// streamed chat requests one after another, through the official OpenAI
// client. Reports requests/s, time to first token and tokens/s per stream.
//   node scripts/serve-load.mjs URL [N=4] [M=8] [MAX_TOKENS=64] [API_KEY]
// It stops by itself after N x M requests; only loopback URLs are accepted.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const OpenAI = (await import(require.resolve('openai', { paths: [new URL('../tests/node/', import.meta.url).pathname] }))).default;
const [url, nArg, mArg, tokArg, key] = process.argv.slice(2);
if (!url || !/^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d+$/.test(url)) {
  console.error('usage: node scripts/serve-load.mjs http://127.0.0.1:PORT [N] [M] [MAX_TOKENS] [API_KEY]  (loopback only)');
  process.exit(2);
}
const N = Math.min(+(nArg ?? 4), 64), M = Math.min(+(mArg ?? 8), 1000), maxTokens = +(tokArg ?? 64);
const client = new OpenAI({ baseURL: url + '/v1', apiKey: key ?? 'none', maxRetries: 0, timeout: 300000 });
const topics = ['the sea', 'a river', 'the king', 'a garden', 'the wind', 'a city', 'the law', 'a horse'];

const ttft = [], rate = [], errors = [];
let tokens = 0;
async function one(i, j) {
  const t0 = performance.now();
  let tFirst = 0, n = 0;
  const s = await client.chat.completions.create({
    model: 'any', stream: true, stream_options: { include_usage: true }, max_tokens: maxTokens, temperature: 0.8, seed: i * 1000 + j,
    messages: [{ role: 'user', content: `Tell me about ${topics[(i + j) % topics.length]} (${i}.${j}).` }] });
  for await (const c of s) {
    if (!tFirst && c.choices[0]?.delta?.content) tFirst = performance.now();
    if (c.usage) n = c.usage.completion_tokens;
  }
  const t1 = performance.now();
  ttft.push(tFirst - t0);
  if (n > 1 && t1 > tFirst) rate.push((n - 1) / ((t1 - tFirst) / 1000));
  tokens += n;
}
const t0 = performance.now();
await Promise.all(Array.from({ length: N }, async (_, i) => {
  for (let j = 0; j < M; j++) {
    try { await one(i, j); } catch (e) { errors.push(e.status ?? e.message); }
  }
}));
const secs = (performance.now() - t0) / 1000;
const q = (a, p) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN; };
const mean = (a) => a.reduce((x, y) => x + y, 0) / (a.length || 1);
console.log(JSON.stringify({
  clients: N, requests_per_client: M, max_tokens: maxTokens, seconds: +secs.toFixed(2),
  requests: N * M - errors.length, errors: errors.length,
  requests_per_s: +((N * M - errors.length) / secs).toFixed(2),
  ttft_ms_p50: +q(ttft, 0.5).toFixed(1), ttft_ms_p95: +q(ttft, 0.95).toFixed(1),
  stream_tok_s_mean: +mean(rate).toFixed(1), total_tok_s: +(tokens / secs).toFixed(1),
}));
process.exit(errors.length ? 1 : 0);
