// Session state against prefill, at a real model's shape (llama-8da4w with
// seeded weights): how long a prompt of N tokens takes to prefill, and how
// long saving, restoring (into a new session, and into one kept) and forking
// a session at position N take, and a fork against a plain copy of the cache
// rows it holds (a fork as a server makes one, when a request comes in, and
// one right after another, which waits for the module loaded ahead); how
// many bytes the snapshot holds against the cache rows it carries; and how
// much of a later request's prompt `complete()` skips on a fork.
//
//   node bench/session-state.mjs [--preset stories110m] [--tokens 512] [--threads 1] [--repeats 5]
//
// Needs `npm run build`. Figures are medians of --repeats runs.
import { parseArgs } from 'node:util';

import { cacheRanges } from '../dist/llm/snapshot.js';
import { largeBytes } from '../dist/module.js';
import { loadWordLlama } from '../dist/tools/bench/word-llama.js';
import { llama8da4wPreset } from '../dist/tools/examples/llama-8da4w.js';

const { values } = parseArgs({
  options: {
    preset: { type: 'string', default: 'stories110m' },
    tokens: { type: 'string', default: '512' },
    threads: { type: 'string', default: '1' },
    repeats: { type: 'string', default: '5' },
  },
});
const config = llama8da4wPreset(values.preset);
const tokens = Number(values.tokens);
const repeats = Number(values.repeats);

const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
async function timed(action) {
  const start = performance.now();
  const result = await action();
  return { ms: performance.now() - start, result };
}

// A word-level tokenizer with one word per id: the benchmark feeds ids, not text.
const llm = await loadWordLlama(config, Number(values.threads));
const prompt = Array.from({ length: tokens }, (_, i) => (i * 7919 + 13) % config.vocab);
const greedy = { temperature: 0, maxNewTokens: 1 };

const prefill = [];
const save = [];
const restore = [];
const restoreInPlace = [];
const fork = [];
const forkAgain = [];
const rowCopy = [];
const firstToken = { full: [], forked: [] };
let snapshotBytes = 0;
const { state } = llm.program.describe().methods.find((method) => method.name === llm.metadata.decode.name);
const rowBytes = cacheRanges(state, llm.metadata, tokens).reduce((sum, [, size]) => sum + size, 0);
for (let r = 0; r < repeats; r++) {
  const session = await llm.session();
  prefill.push((await timed(() => session.complete(prompt, greedy))).ms);
  const saved = await timed(() => session.save());
  save.push(saved.ms);
  snapshotBytes = saved.result.byteLength;
  const restored = await timed(() => llm.restoreSession(saved.result));
  restore.push(restored.ms);
  // A session a server keeps, taking a conversation in: no module to load.
  restoreInPlace.push((await timed(() => restored.result.restore(saved.result))).ms);
  // A request that forks comes in a while after the last session was made
  // (nothing runs in the background meanwhile).
  await new Promise((resolve) => setTimeout(resolve, 200));
  // What fork() is held to: copying the rows it holds into memory not touched before.
  const rowsCopied = await timed(() => largeBytes(rowBytes).set(saved.result.subarray(saved.result.byteLength - rowBytes)));
  rowCopy.push(rowsCopied.ms);
  const forked = await timed(() => session.fork());
  fork.push(forked.ms);
  const again = await timed(() => session.fork());
  forkAgain.push(again.ms);
  // A later request that starts with the same prompt: on the fork, only its new tokens run.
  const next = [...prompt, 1, 2, 3, 4];
  const full = await llm.generate(next, greedy);
  const onFork = await forked.result.complete(next, greedy);
  firstToken.full.push(full.stats.timeToFirstTokenMs);
  firstToken.forked.push(onFork.stats.timeToFirstTokenMs);
  await Promise.all([session.dispose(), restored.result.dispose(), forked.result.dispose(), again.result.dispose()]);
}
const p = median(prefill);
const rows = (label, ms) =>
  console.log(`${label.padEnd(34)} ${ms.toFixed(2).padStart(9)} ms  ${((100 * ms) / p).toFixed(2).padStart(6)}% of prefill`);
console.log(`${values.preset}, ${tokens} tokens, ${values.threads} thread(s), median of ${repeats}`);
rows(`prefill ${tokens}`, p);
rows('session.save()', median(save));
rows('llm.restoreSession() (new session)', median(restore));
rows('session.restore() (kept session)', median(restoreInPlace));
rows('save + restore (kept session)', median(save) + median(restoreInPlace));
rows('session.fork()', median(fork));
rows('session.fork() right after another', median(forkAgain));
rows('copy of the cache rows (new memory)', median(rowCopy));
console.log(`fork / copy of its rows: ${(median(fork) / median(rowCopy)).toFixed(2)}x`);
console.log(
  `snapshot ${(snapshotBytes / 2 ** 20).toFixed(2)} MiB for ${(rowBytes / 2 ** 20).toFixed(2)} MiB of cache rows (${(snapshotBytes / rowBytes).toFixed(4)}x)`,
);
const full = median(firstToken.full);
const forked = median(firstToken.forked);
console.log(
  `first token of prompt + 4 tokens: ${full.toFixed(2)} ms from an empty cache, ${forked.toFixed(2)} ms on a fork (${(forked / full).toFixed(3)}x)`,
);
await llm.dispose();
