// Resident memory of many sessions over one Program: kv-decoder-large (d=256,
// 12 MiB of weights, 4 MiB of KV cache) lowered to XNNPACK, loaded once, then
// N modules (one per conversation), each resetting, prefilling a 10-token
// prompt and decoding three tokens. An extra session should cost about its
// state (the mem_id 2 arena), not another copy of the packed weights:
// goal, extra session <= 1.15 x state + 256 KiB. Also times Module.load over
// the loaded program (median of N - 1 loads; goal: at most 1 ms).
//
//   npm run build && node --expose-gc bench/sessions-memory.mjs [--sessions N]
import fs from 'node:fs';

const KIB = 1024;
const MIB = 1024 * 1024;

function residentBytes() {
  const match = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return Number(match[1]) * KIB;
}

function settle() {
  if (globalThis.gc) globalThis.gc();
  return residentBytes();
}

const sessionsIndex = process.argv.indexOf('--sessions');
const sessions = sessionsIndex >= 0 ? Number(process.argv[sessionsIndex + 1]) : 17;
if (!Number.isInteger(sessions) || sessions < 2) throw new Error('--sessions needs an integer of at least 2');
if (!globalThis.gc) console.warn('run with node --expose-gc for steadier figures');

const { buildKvDecoder, createKvDecoderWeights, KV_DECODER_LARGE_CONFIG, kvDecoderSession } = await import(
  '../dist/tools/examples/index.js'
);
const { Module, Program } = await import('../dist/index.js');

const bytes = buildKvDecoder(createKvDecoderWeights(KV_DECODER_LARGE_CONFIG)).toPte({ xnnpack: true });
// Reset, two prefill chunks, three decode steps.
const calls = kvDecoderSession(KV_DECODER_LARGE_CONFIG).slice(0, 6);

const beforeProgram = settle();
const program = Program.load(bytes);
const afterProgram = settle();

const modules = [];
const resident = [];
for (let i = 0; i < sessions; i++) {
  const module = await Module.load(program, { shareMemoryArenas: true });
  for (const call of calls) await module.execute(call.method, call.inputs);
  modules.push(module);
  resident.push(settle());
}

// Creation time, apart from the calls and collections above: N - 1 more
// modules loaded back to back over the program.
const loadMs = [];
const timed = [];
for (let i = 1; i < sessions; i++) {
  const started = process.hrtime.bigint();
  timed.push(await Module.load(program, { shareMemoryArenas: true }));
  loadMs.push(Number(process.hrtime.bigint() - started) / 1e6);
}
await Promise.all(timed.map((module) => module.dispose()));

const first = modules[0].memoryReport();
const last = modules[sessions - 1].memoryReport();
const stateBytes = first.arenas.filter((arena) => arena.memoryId === 2).reduce((sum, arena) => sum + arena.bytes, 0);
const perExtra = (resident[sessions - 1] - resident[0]) / (sessions - 1);
const goal = 1.15 * stateBytes + 256 * KIB;
const mib = (n) => (n / MIB).toFixed(2);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

console.log(`kv-decoder-large lowered to XNNPACK, ${sessions} sessions over one Program`);
console.log(`program load                 ${mib(afterProgram - beforeProgram)} MiB`);
console.log(`first session                ${mib(resident[0] - afterProgram)} MiB`);
console.log(`per extra session            ${mib(perExtra)} MiB`);
console.log(`state (mem_id 2) per session ${mib(stateBytes)} MiB`);
console.log(`goal (1.15 x state + 256 KiB) ${mib(goal)} MiB: ${perExtra <= goal ? 'met' : 'NOT met'}`);
console.log(`Module.load over the program  ${median(loadMs).toFixed(2)} ms (median of ${sessions - 1} loads; goal 1 ms)`);
console.log(
  `memoryReport of the last session: packedWeightBytes ${mib(last.packedWeightBytes)} MiB, ` +
    `sharedPackedWeightBytes ${mib(last.sharedPackedWeightBytes ?? 0)} MiB, workspaceBytes ${mib(last.workspaceBytes)} MiB, ` +
    `plannedBytes ${mib(last.plannedBytes)} MiB`,
);
console.log(
  `  ownedBytes ${mib(last.ownedBytes ?? NaN)} MiB, sharedBytes ${mib(last.sharedBytes ?? NaN)} MiB, ` +
    `pooledArenaBytes ${mib(last.pooledArenaBytes ?? NaN)} MiB, pooledWorkspaceBytes ${mib(last.pooledWorkspaceBytes ?? NaN)} MiB`,
);

await Promise.all(modules.map((module) => module.dispose()));
