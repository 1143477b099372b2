// The MobileNetV3-style block of test/onnx/mobilenet-block.ts (1x3x48x192):
// time per call of etna (imported, XNNPACK) and onnxruntime-node, side by
// side in one process, one thread each. Needs the native build.
// Usage: npx tsx bench/onnx-mobilenet-block.ts [--calls 500]
import * as ort from 'onnxruntime-node';

import { Module, Tensor } from '../lib/index.js';
import { importOnnx } from '../lib/onnx/index.js';
import { BLOCK_INPUT_SHAPE, mobilenetBlockModel, seededValues } from '../test/onnx/mobilenet-block.js';

const at = process.argv.indexOf('--calls');
const calls = at >= 0 ? Number(process.argv[at + 1]) : 500;

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function timeCalls(step: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 20; i++) await step();
  const samples: number[] = [];
  for (let i = 0; i < calls; i++) {
    const start = process.hrtime.bigint();
    await step();
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return median(samples);
}

const model = mobilenetBlockModel();
const data = Float32Array.from(
  seededValues(
    BLOCK_INPUT_SHAPE.reduce((a, b) => a * b, 1),
    42,
  ),
);
const imported = importOnnx(model);
const module = await Module.load(imported.bytes);
const input = Tensor.float32(BLOCK_INPUT_SHAPE, data);
const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
const feeds = { x: new ort.Tensor('float32', data, BLOCK_INPUT_SHAPE) };

const etnaMs = await timeCalls(() => module.run('forward', { x: input }));
const ortMs = await timeCalls(() => session.run(feeds));
console.log(
  `mobilenet block ${BLOCK_INPUT_SHAPE.join('x')}: ${imported.calls.delegate} delegate calls, ${imported.calls.kernel} kernel calls`,
);
console.log(`etna (XNNPACK)   p50 ${etnaMs.toFixed(3)} ms per call`);
console.log(`onnxruntime-node p50 ${ortMs.toFixed(3)} ms per call`);
await module.dispose();
await session.release();
