// Growth check: 100,000 execute() calls (async, on the thread pool) across
// three programs: portable kernels, two methods with shared arenas, and an
// XNNPACK delegate. RSS after warm-up must stay within 5%.
// The V8 flags fix the young generation's size: V8 otherwise grows it once the
// allocation rate has been high for a while (after ~100,000 calls here), and
// that one-time step of several MiB would read as growth.
//   node --expose-gc --min-semi-space-size=16 --max-semi-space-size=16 bench/leak-execute.mjs [--calls N] [--tolerance 0.05]
import path from 'node:path';
import { importEtna, requireGc, settledRss, testdataDir, verdict } from './leak-common.mjs';

requireGc();
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const calls = option('--calls', 100_000);
const tolerance = option('--tolerance', 0.05);
const warmup = Math.max(1, Math.floor(calls / 10));
const batch = 64;

const { Module, Tensor } = await importEtna();
const add = await Module.load(path.join(testdataDir, 'et_add.pte'));
const multi = await Module.load(path.join(testdataDir, 'npr_multi_method.pte'), { shareMemoryArenas: true });
const xnn = await Module.load(path.join(testdataDir, 'npr_add_xnnpack.pte'));

function call(i) {
  switch (i % 4) {
    case 0:
      return add.execute('forward', [Tensor.float32([1], [i]), Tensor.float32([1], [1])]).then(([y]) => {
        if (y.data[0] !== Math.fround(i) + 1) throw new Error(`et_add: wrong result at call ${i}`);
      });
    case 1:
      return multi.execute('double', [Tensor.float32([2], [i, 0])]);
    case 2:
      return multi.execute('forward', [Tensor.float32([2], [0, i])]);
    default:
      return xnn.execute('forward', [Tensor.float32([3], [1, 2, 3]), Tensor.float32([3], [i, i, i])]).then(([y]) => {
        if (y.data[2] !== Math.fround(i) + 3) throw new Error(`npr_add_xnnpack: wrong result at call ${i}`);
      });
  }
}

async function run(count, samples) {
  const every = Math.max(batch, Math.floor(count / 20));
  for (let done = 0; done < count; done += batch) {
    const pending = [];
    for (let i = done; i < Math.min(count, done + batch); i++) pending.push(call(i));
    await Promise.all(pending);
    if (samples && done % every < batch) samples.push(await settledRss());
  }
}

const started = performance.now();
await run(warmup);
const baseline = await settledRss();
const samples = [];
await run(calls, samples);
const final = await settledRss();
const seconds = (performance.now() - started) / 1000;
console.log(`${calls} execute calls after ${warmup} warm-up calls in ${seconds.toFixed(1)} s`);
const ok = verdict('execute', baseline, samples, final, tolerance);
await Promise.all([add.dispose(), multi.dispose(), xnn.dispose()]);
process.exit(ok ? 0 : 1);
