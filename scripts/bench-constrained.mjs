// Generation speed with and without constrained decoding, side by side
// (docs/SERVE.md "Constrained decoding"): ROUNDS x (one plain request, one
// with response_format json_schema) of the same prompt, streamed, greedy.
// tok/s counts the tokens after the first chunk over the time from the first
// chunk to the last, so the prompt's prefill is left out of both. Prints the
// median and the best round of each (on a shared machine the best is the
// least disturbed).
//   node scripts/bench-constrained.mjs URL [MAX_TOKENS=128] [ROUNDS=3]
const [url, maxTok = '128', rounds = '3'] = process.argv.slice(2);
if (!url) {
  console.error('usage: node scripts/bench-constrained.mjs URL [MAX_TOKENS] [ROUNDS]');
  process.exit(2);
}
// Tool-argument shapes: structure, keys, short capped strings, integers with bounds, enums, nested arrays; minItems keeps it
// going past MAX_TOKENS so both requests generate the same number of tokens.
const schema = {
  type: 'array', minItems: 200,
  items: {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 12 },
      city: { type: 'string', maxLength: 24 },
      n: { type: 'integer', minimum: -50, maximum: 5000 },
      kind: { enum: ['alpha', 'beta', 'gamma'] },
      tags: { type: 'array', items: { type: 'string', maxLength: 8 }, maxItems: 3 },
    },
    required: ['name', 'city', 'n', 'kind', 'tags'],
  },
};

async function one(constrained) {
  const body = {
    messages: [{ role: 'user', content: 'List the planets of the solar system with a note on each.' }],
    max_tokens: Number(maxTok), temperature: 0, stream: true, stream_options: { include_usage: true },
  };
  if (constrained) body.response_format = { type: 'json_schema', json_schema: { name: 'planets', strict: true, schema } };
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let first = 0, last = 0, tokens = 0, buf = '', finish = '', text = '';
  const dec = new TextDecoder();
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const j = JSON.parse(ev.slice(6));
      if (j.usage) tokens = j.usage.completion_tokens;
      const c = j.choices?.[0];
      if (c?.finish_reason) finish = c.finish_reason;
      if (c?.delta?.content || c?.delta?.reasoning_content) {
        const t = performance.now();
        if (!first) first = t;
        last = t;
        text += c.delta.content || '';
      }
    }
  }
  return { tps: (tokens - 1) / ((last - first) / 1000), tokens, finish, text };
}

const res = { plain: [], schema: [] };
await one(false); // warm-up: pages of the model mapped in
for (let r = 0; r < Number(rounds); r++)
  for (const c of [false, true]) {
    const o = await one(c);
    const k = c ? 'schema' : 'plain';
    res[k].push(o.tps);
    console.log(`round ${r + 1} ${k.padEnd(6)} ${o.tokens} tokens (${o.finish}) ${o.tps.toFixed(2)} tok/s`);
    if (r === 0 && c) console.log(`  ${JSON.stringify(o.text.slice(0, 160))}...`);
  }
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const best = (a) => Math.max(...a);
const p = median(res.plain), s = median(res.schema), pb = best(res.plain), sb = best(res.schema);
// the best round of each is the one other jobs on the machine disturbed least
console.log(`median: plain ${p.toFixed(2)} tok/s, response_format ${s.toFixed(2)} tok/s (cost ${((p / s - 1) * 100).toFixed(1)}%); ` +
  `best: plain ${pb.toFixed(2)}, response_format ${sb.toFixed(2)} (cost ${((pb / sb - 1) * 100).toFixed(1)}% of a token's time)`);
