// Where a prefill's time goes, operator by operator: loads an LLM program
// written by `etna bench llm` (prefill(tokens, start_pos) and decode methods),
// runs a warm-up prefill, then profiles N more and prints the costliest
// operators and delegate stages with their share of the calls' native time.
//
//   npm run build && node bench/llm-prefill-profile.mjs bench/cache/llm/stories110m/model.pte [--threads N] [--tokens N] [--runs N]
const { Module, Tensor, summarizeProfile } = await import('../dist/index.js');

const path = process.argv[2];
if (!path || path.startsWith('--')) throw new Error('first argument: the .pte file');
function option(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return Number(index >= 0 ? process.argv[index + 1] : fallback);
}
const threads = option('threads', 2);
const tokens = option('tokens', 128);
const runs = option('runs', 3);

const module = await Module.load(path, { shareMemoryArenas: true, numThreads: threads });
const ids = Array.from({ length: tokens }, (_, i) => (i * 7919 + 13) % 1000);
const prefill = () => module.execute('prefill', [Tensor.int64([1, tokens], ids), Tensor.int64([1], [0])]);
await prefill();
module.startProfiling();
for (let i = 0; i < runs; i++) await prefill();
const events = module.endProfiling();
const callMs = events.filter((e) => e.category === 'call').reduce((sum, e) => sum + e.durationUs / 1000, 0);
console.log(`${runs} prefills of ${tokens} tokens at ${threads} thread(s): ${(callMs / runs).toFixed(1)} ms each in the instruction loop`);
for (const row of summarizeProfile(events).slice(0, 10)) {
  console.log(
    `${row.percent.toFixed(1).padStart(5)}%  ${(row.selfMs / runs).toFixed(2).padStart(8)} ms  ${row.category.padEnd(8)} ${row.name}`,
  );
}
module.dispose?.();
