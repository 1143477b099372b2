// Per-call overhead: etna execute / executeSync on et_add.pte (two float32[1]
// inputs) beside onnxruntime-node running an equivalent one-node Add model, in
// the same process and run. Usage: node bench/call-overhead.mjs [PTE] [--calls N]
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

import ort from 'onnxruntime-node';

import { Module } from '../dist/index.js';
import { ProtoWriter } from '../dist/tools/onnx-emitter/protobuf.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { calls: { type: 'string', default: '20000' } } });
const candidates = [positionals[0], 'test/fixtures/pte/et_add.pte'].filter(Boolean);
const ptePath = candidates.find((p) => existsSync(p));
if (ptePath === undefined) throw new Error('et_add.pte not found; pass its path');
const calls = Number(values.calls);

// A float32[1] + float32[1] -> float32[1] ONNX model, written field by field.
function addModel() {
  const info = (w, name) =>
    w.string(1, name).message(2, (t) => t.message(1, (tt) => tt.int(1, 1).message(2, (s) => s.message(1, (d) => d.int(1, 1)))));
  return new ProtoWriter()
    .int(1, 8)
    .message(7, (g) => {
      g.message(1, (n) => n.string(1, 'x').string(1, 'y').string(2, 'z').string(4, 'Add'));
      g.string(2, 'add');
      g.message(11, (w) => info(w, 'x'));
      g.message(11, (w) => info(w, 'y'));
      g.message(12, (w) => info(w, 'z'));
    })
    .message(8, (o) => o.string(1, '').int(2, 17))
    .finish();
}

// Times every call; returns its figures in µs: the mean over the loop, and
// the median and 95th percentile of single calls.
async function timeLoop(fn) {
  for (let i = 0; i < Math.min(2000, calls / 10); i++) await fn();
  const samples = new Float64Array(calls);
  const start = performance.now();
  for (let i = 0; i < calls; i++) {
    const t0 = performance.now();
    await fn();
    samples[i] = performance.now() - t0;
  }
  const mean = ((performance.now() - start) * 1000) / calls;
  samples.sort();
  const at = (q) => samples[Math.min(calls - 1, Math.floor(q * calls))] * 1000;
  return { mean, p50: at(0.5), p95: at(0.95) };
}

const module = await Module.load(ptePath, { shareMemoryArenas: true });
const a = new Float32Array([1.5]);
const b = new Float32Array([2.25]);
const inputs = [
  { dtype: 'float32', shape: [1], data: a },
  { dtype: 'float32', shape: [1], data: b },
];
const check = module.executeSync('forward', inputs)[0].data[0];
const session = await ort.InferenceSession.create(addModel(), { intraOpNumThreads: 1, interOpNumThreads: 1 });
const feeds = { x: new ort.Tensor('float32', a, [1]), y: new ort.Tensor('float32', b, [1]) };
const ortCheck = (await session.run(feeds)).z.data[0];
if (check !== 3.75 || ortCheck !== 3.75) throw new Error(`unexpected sums: etna ${check}, onnxruntime ${ortCheck}`);

// Interleave rounds so that machine noise hits every variant alike.
const rounds = 3;
const figures = { 'etna executeSync': [], 'etna execute (async)': [], 'onnxruntime session.run (async)': [] };
for (let r = 0; r < rounds; r++) {
  figures['etna executeSync'].push(await timeLoop(() => module.executeSync('forward', inputs)));
  figures['etna execute (async)'].push(await timeLoop(() => module.execute('forward', inputs)));
  figures['onnxruntime session.run (async)'].push(await timeLoop(() => session.run(feeds)));
}
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const figure = (samples, key) => median(samples.map((s) => s[key]));
const base = figure(figures['etna executeSync'], 'mean');
const onnxruntimeMean = figure(figures['onnxruntime session.run (async)'], 'mean');
console.log(`per-call overhead, ${calls} calls x ${rounds} interleaved rounds (median round), node ${process.version}`);
console.log('| call | µs per call | p50 / p95 µs | vs executeSync | vs session.run |');
console.log('| --- | --- | --- | --- | --- |');
for (const [name, samples] of Object.entries(figures)) {
  const mean = figure(samples, 'mean');
  const spread = `${figure(samples, 'p50').toFixed(2)} / ${figure(samples, 'p95').toFixed(2)}`;
  console.log(`| ${name} | ${mean.toFixed(2)} | ${spread} | ${(mean / base).toFixed(2)}x | ${(mean / onnxruntimeMean).toFixed(2)}x |`);
}
await module.dispose();
await session.release();
