// etna's XNNPACK delegate against the same graphs run directly on XNNPACK
// (bench/xnnpack-raw.cpp) and on onnxruntime-node, side by side in one run,
// all on one thread:
//   mlp b1 / mlp b64: 4 linear 1024x1024 layers (+bias, relu between)
//   conv: three 3x3 convolutions with relu on a 1x3x64x64 image
//
//   node bench/xnnpack-bench.mjs [--quick] [--json OUT]
//
// Needs the compiled library (dist/) and the addon; compiles the raw program
// with g++ against the system XNNPACK.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Module, Tensor } from '../dist/index.js';
import { builderToOnnx } from '../dist/tools/onnx-emitter/index.js';
import { ProtoWriter } from '../dist/tools/onnx-emitter/protobuf.js';
import { buildConvNet, buildMlp, CONV_LAYERS, convInput, IMAGE, mlpInput, randomValues } from './xnnpack-models.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const jsonIndex = args.indexOf('--json');
const jsonPath = jsonIndex >= 0 ? args[jsonIndex + 1] : undefined;
const ROUNDS = quick ? 3 : 7;

const CASES = [
  { name: 'mlp b1', model: 'mlp', batch: 1, calls: quick ? 50 : 300 },
  { name: 'mlp b64', model: 'mlp', batch: 64, calls: quick ? 5 : 20 },
  { name: 'conv', model: 'conv', batch: 1, calls: quick ? 10 : 60 },
];

function compileRaw() {
  const binary = path.join(os.tmpdir(), `etna-xnnpack-raw-${process.pid}`);
  execFileSync(
    'g++',
    ['-O2', '-std=c++17', '-Wall', '-Wextra', path.join(here, 'xnnpack-raw.cpp'), '-lXNNPACK', '-lpthreadpool', '-o', binary],
    { stdio: 'inherit' },
  );
  return binary;
}

function runRaw(binary, c) {
  const argv = c.model === 'mlp' ? ['mlp', String(c.batch), String(c.calls), String(ROUNDS)] : ['conv', String(c.calls), String(ROUNDS)];
  return JSON.parse(execFileSync(binary, argv, { encoding: 'utf8' }));
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

// Wall and process CPU milliseconds per call: medians over rounds of the
// round mean, after a warm-up. CPU time leaves out the time other processes
// hold the core, which dominates on a loaded machine.
async function timeCalls(call, calls) {
  for (let i = 0; i < Math.max(5, calls / 4); i++) await call();
  const wall = [];
  const cpu = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.hrtime.bigint();
    const cpuStart = process.cpuUsage();
    for (let i = 0; i < calls; i++) await call();
    const used = process.cpuUsage(cpuStart);
    wall.push(Number(process.hrtime.bigint() - start) / 1e6 / calls);
    cpu.push((used.user + used.system) / 1e3 / calls);
  }
  return { ms: median(wall), cpuMs: median(cpu) };
}

function best(a, b) {
  return { ms: Math.min(a.ms, b.ms), cpuMs: Math.min(a.cpuMs, b.cpuMs) };
}

function checksum(values) {
  let sum = 0;
  for (const v of values) sum += v;
  return sum;
}

function caseProgram(c) {
  return c.model === 'mlp' ? buildMlp(c.batch) : buildConvNet();
}

function caseInput(c) {
  return c.model === 'mlp'
    ? { shape: [c.batch, 1024], data: mlpInput(c.batch) }
    : { shape: [1, CONV_LAYERS[0].inChannels, IMAGE, IMAGE], data: convInput() };
}

async function runEtna(c) {
  const module = await Module.load(caseProgram(c).toPte({ xnnpack: true }), { numThreads: 1 });
  const { shape, data } = caseInput(c);
  const input = Tensor.float32(shape, data);
  const sync = await timeCalls(() => module.executeSync('forward', [input]), c.calls);
  const async = await timeCalls(() => module.execute('forward', [input]), c.calls);
  const [y] = module.executeSync('forward', [input]);
  const packed = module.memoryReport().packedWeightBytes;
  await module.dispose();
  return { sync, async, checksum: checksum(y.data), packed };
}

// The ONNX emitter covers the MLP; the conv net is written here as Conv + Relu nodes.
function convOnnxModel() {
  const initializers = [];
  const nodes = [];
  let current = 'x';
  CONV_LAYERS.forEach((layer, l) => {
    const weight = randomValues(layer.outChannels * layer.inChannels * 9, 300 + l, 0.2);
    const bias = randomValues(layer.outChannels, 400 + l, 0.05);
    initializers.push({ name: `w${l}`, dims: [layer.outChannels, layer.inChannels, 3, 3], data: weight });
    initializers.push({ name: `b${l}`, dims: [layer.outChannels], data: bias });
    nodes.push({
      op: 'Conv',
      inputs: [current, `w${l}`, `b${l}`],
      output: `c${l}`,
      ints: { kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [layer.stride, layer.stride] },
    });
    nodes.push({ op: 'Relu', inputs: [`c${l}`], output: `r${l}`, ints: {} });
    current = `r${l}`;
  });
  let size = IMAGE;
  for (const layer of CONV_LAYERS) size = Math.floor((size + 2 - 3) / layer.stride) + 1;
  const valueInfo = (w, name, dims) => {
    w.string(1, name);
    w.message(2, (type) =>
      type.message(1, (tensor) => {
        tensor.int(1, 1);
        tensor.message(2, (shape) => {
          for (const d of dims) shape.message(1, (dim) => dim.int(1, d));
        });
      }),
    );
  };
  const model = new ProtoWriter();
  model.int(1, 8);
  model.string(2, 'etna-bench');
  model.message(7, (graph) => {
    nodes.forEach((node, i) =>
      graph.message(1, (n) => {
        for (const input of node.inputs) n.string(1, input);
        n.string(2, node.output);
        n.string(3, `${node.op}_${i}`);
        n.string(4, node.op);
        for (const [name, values] of Object.entries(node.ints)) n.message(5, (at) => at.string(1, name).packedInts(8, values).int(20, 7));
      }),
    );
    graph.string(2, 'convnet');
    for (const init of initializers) {
      graph.message(5, (t) => t.packedInts(1, init.dims).int(2, 1).string(8, init.name).bytes(9, new Uint8Array(init.data.buffer)));
    }
    graph.message(11, (w) => valueInfo(w, 'x', [1, CONV_LAYERS[0].inChannels, IMAGE, IMAGE]));
    graph.message(12, (w) => valueInfo(w, current, [1, CONV_LAYERS.at(-1).outChannels, size, size]));
  });
  model.message(8, (opset) => opset.string(1, '').int(2, 17));
  return { bytes: model.finish(), input: 'x', output: current };
}

async function runOrt(ort, c) {
  let bytes;
  let inputName;
  let outputName;
  if (c.model === 'mlp') {
    const onnx = builderToOnnx(caseProgram(c)).methods[0];
    bytes = onnx.bytes;
    inputName = onnx.inputs[0].name;
    outputName = onnx.outputs[0].name;
  } else {
    ({ bytes, input: inputName, output: outputName } = convOnnxModel());
  }
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
  const { shape, data } = caseInput(c);
  const feeds = { [inputName]: new ort.Tensor('float32', data, shape) };
  const timing = await timeCalls(() => session.run(feeds), c.calls);
  const result = await session.run(feeds);
  await session.release();
  return { ...timing, checksum: checksum(result[outputName].data) };
}

function close(a, b) {
  return Math.abs(a - b) <= 1e-3 * Math.max(1, Math.abs(b));
}

const ortModule = await import('onnxruntime-node');
const ort = ortModule.default ?? ortModule;
const binary = compileRaw();
const results = [];
try {
  for (const c of CASES) {
    // Two passes in opposite orders; the faster of the two medians is kept for each runner.
    const raw1 = runRaw(binary, c);
    const etna1 = await runEtna(c);
    const ort1 = await runOrt(ort, c);
    const ort2 = await runOrt(ort, c);
    const etna2 = await runEtna(c);
    const raw2 = runRaw(binary, c);
    const raw = best(raw1, raw2);
    const sync = best(etna1.sync, etna2.sync);
    const async = best(etna1.async, etna2.async);
    const ortTiming = best(ort1, ort2);
    const row = {
      case: c.name,
      raw,
      etnaSync: sync,
      etnaExecute: async,
      onnxruntime: ortTiming,
      packedWeightBytes: etna1.packed,
      sameResult: close(etna1.checksum, raw1.checksum) && close(ort1.checksum, raw1.checksum),
    };
    results.push(row);
    console.error(
      `${c.name}: raw ${raw.ms.toFixed(3)} ms, etna sync ${sync.ms.toFixed(3)} / async ${async.ms.toFixed(3)} ms, ort ${ortTiming.ms.toFixed(3)} ms, checksums ${row.sameResult ? 'agree' : `DIFFER (raw ${raw1.checksum}, etna ${etna1.checksum}, ort ${ort1.checksum})`}`,
    );
  }
} finally {
  fs.rmSync(binary, { force: true });
}

const f = (t) => `${t.ms.toFixed(3)} / ${t.cpuMs.toFixed(3)}`;
const ratio = (a, b) => `${(a.ms / b.ms).toFixed(2)}x / ${(a.cpuMs / b.cpuMs).toFixed(2)}x`;
console.log(
  `Node ${process.version}, ${os.cpus()[0]?.model ?? 'cpu'} (${os.cpus().length} cores), 1 thread, ${ROUNDS} rounds. Each cell: wall ms / CPU ms per call (median of round means, best of two passes).\n`,
);
console.log(
  '| case | raw XNNPACK | etna executeSync | etna execute | onnxruntime | executeSync / raw | execute / raw | executeSync / onnxruntime | outputs agree |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of results) {
  console.log(
    `| ${r.case} | ${f(r.raw)} | ${f(r.etnaSync)} | ${f(r.etnaExecute)} | ${f(r.onnxruntime)} | ${ratio(r.etnaSync, r.raw)} | ${ratio(r.etnaExecute, r.raw)} | ${ratio(r.etnaSync, r.onnxruntime)} | ${r.sameResult ? 'yes' : 'no'} |`,
  );
}
if (jsonPath !== undefined) fs.writeFileSync(jsonPath, JSON.stringify({ node: process.version, rounds: ROUNDS, results }, null, 2));
