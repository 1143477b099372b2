// Growth check: 200 load/execute/dispose cycles (Program and Module, arenas
// shared and not, XNNPACK packing, a stateful authored program). RSS after
// warm-up must stay within 5%.
//   node --expose-gc --min-semi-space-size=16 --max-semi-space-size=16 bench/leak-load.mjs [--cycles N] [--tolerance 0.05]
import fs from 'node:fs';
import path from 'node:path';
import { importEtna, requireGc, settledRss, testdataDir, verdict } from './leak-common.mjs';

requireGc();
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const cycles = option('--cycles', 200);
const tolerance = option('--tolerance', 0.05);
const warmup = Math.max(1, Math.floor(cycles / 10));

const { Module, Program, Tensor, exportExample } = await importEtna();
const sources = {
  multi: fs.readFileSync(path.join(testdataDir, 'npr_multi_method.pte')),
  conv: fs.readFileSync(path.join(testdataDir, 'djl_conv_xnnpack.pte')),
  softmax: path.join(testdataDir, 'et_softmax_pr17248.pte'),
  gru: exportExample('gru-stream'),
};
const frame = Tensor.float32([1, 16], new Float32Array(16).fill(0.25));
const image = Tensor.float32([1, 3, 16, 16], new Float32Array(768).fill(0.5));
const rows = Tensor.float32([2, 4096], new Float32Array(8192).fill(1));

async function cycle(i) {
  const share = i % 2 === 0;
  const multi = await Module.load(Program.load(sources.multi), { shareMemoryArenas: share });
  await multi.execute('double', [Tensor.float32([2], [1, 2])]);
  await multi.execute('forward', [Tensor.float32([2], [1, 2])]);
  const conv = await Module.load(sources.conv, { shareMemoryArenas: share });
  await conv.execute('forward', [image]);
  const softmax = await Module.load(sources.softmax);
  await softmax.execute('forward', [rows]);
  const gru = await Module.load(sources.gru, { shareMemoryArenas: true });
  await gru.execute('reset');
  await gru.execute('step', [frame]);
  // One module is disposed with a call still queued.
  const queued = softmax.execute('forward', [rows]).catch(() => undefined);
  await Promise.all([multi.dispose(), conv.dispose(), softmax.dispose(), gru.dispose(), queued]);
}

async function run(count, samples) {
  const every = Math.max(1, Math.floor(count / 20));
  for (let i = 0; i < count; i++) {
    await cycle(i);
    if (samples && i % every === 0) samples.push(await settledRss());
  }
}

const started = performance.now();
await run(warmup);
const baseline = await settledRss();
const samples = [];
await run(cycles, samples);
const final = await settledRss();
const seconds = (performance.now() - started) / 1000;
console.log(`${cycles} load/dispose cycles (4 modules each) after ${warmup} warm-up cycles in ${seconds.toFixed(1)} s`);
process.exit(verdict('load/dispose', baseline, samples, final, tolerance) ? 0 : 1);
