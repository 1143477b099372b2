// A decode step with int8 KV caches (export_llama's --quantize_kv_cache:
// custom_quantized_sdpa over int8 rows with per-position scales and zero
// points) against one with float32 caches (custom_sdpa), at a real model's
// shape (llama-8da4w's stories110m preset, seeded weights) with the cache
// nearly full, and the state (cache) bytes each program holds.
//
//   node bench/kv-cache-decode.mjs [--preset stories110m] [--position 1000] [--steps 16] [--threads 1] [--repeats 3]
//
// Needs `npm run build`. Both programs are prefilled with the same tokens up
// to --position; then each timed step decodes one token on each program in
// turn (so both see the same machine), and the figure is the median step.
import { parseArgs } from 'node:util';

import { Module, Tensor } from '../dist/index.js';
import { buildLlama8da4w, createLlama8da4wWeights, llama8da4wPreset } from '../dist/tools/examples/llama-8da4w.js';

const { values } = parseArgs({
  options: {
    preset: { type: 'string', default: 'stories110m' },
    position: { type: 'string', default: '1000' },
    steps: { type: 'string', default: '16' },
    threads: { type: 'string', default: '1' },
    repeats: { type: 'string', default: '3' },
  },
});
const config = llama8da4wPreset(values.preset);
const position = Number(values.position);
const steps = Number(values.steps);
const repeats = Number(values.repeats);
if (position + steps > config.context) throw new Error(`--position ${position} + --steps ${steps} exceeds the context ${config.context}`);

const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
const weights = createLlama8da4wWeights(config);
const kinds = ['float32', 'int8'];
const programs = {};
for (const kind of kinds) {
  const lowered = buildLlama8da4w(weights, { quantizeKvCache: kind === 'int8' }).export({ xnnpack: true });
  programs[kind] = { bytes: lowered.bytes, stateBytes: lowered.plan.sharedBytes };
}

const token = (i) => (i * 7919 + 13) % config.vocab;
const times = { float32: [], int8: [] };
for (let r = 0; r < repeats; r++) {
  const modules = {};
  for (const kind of kinds) {
    const module = await Module.load(programs[kind].bytes, { shareMemoryArenas: true, numThreads: Number(values.threads) });
    for (let at = 0; at < position; at += config.prefillLength) {
      const chunk = Array.from({ length: Math.min(config.prefillLength, position - at) }, (_, i) => token(at + i));
      await module.execute('prefill', [Tensor.int64([1, chunk.length], chunk), Tensor.int64([1], [at])]);
    }
    modules[kind] = module;
  }
  for (let step = 0; step < steps; step++) {
    const inputs = [Tensor.int64([1, 1], [token(position + step)]), Tensor.int64([1], [position + step])];
    for (const kind of step % 2 === 0 ? kinds : [...kinds].reverse()) {
      const start = performance.now();
      await modules[kind].execute('decode', inputs);
      times[kind].push(performance.now() - start);
    }
  }
  await Promise.all(kinds.map((kind) => modules[kind].dispose()));
}

const float = median(times.float32);
const int8 = median(times.int8);
console.log(
  `${values.preset}, decode at positions ${position}..${position + steps - 1} of ${config.context}, ${values.threads} thread(s), median of ${repeats * steps} steps`,
);
console.log(`float32 caches  ${float.toFixed(2).padStart(8)} ms/step  state ${(programs.float32.stateBytes / 2 ** 20).toFixed(1)} MiB`);
console.log(
  `int8 caches     ${int8.toFixed(2).padStart(8)} ms/step  state ${(programs.int8.stateBytes / 2 ** 20).toFixed(1)} MiB` +
    `  (${(int8 / float).toFixed(3)}x the step, ${(programs.int8.stateBytes / programs.float32.stateBytes).toFixed(3)}x the state)`,
);
