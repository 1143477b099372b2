// Loading a program with ~100 MiB of constants from its path, read into a
// private copy (the default) or mapped ({ mmap: true }), and from bytes already
// in memory; each way in its own child process, after a warm-up load of a tiny
// program. Reports load time and resident-memory growth over the process
// before the load (with bytes, the caller's copy is already in). Then the
// price of the per-call check that a mapped file has not changed on disk:
// executeSync of a one-add program, copied vs mapped.
// Usage: node bench/mapped-load.mjs [--mib N] [--calls N]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const rssBytes = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;

const LOADS = {
  'copy-program': 'Program.load(path) -> Module.load(program)',
  'copy-module': 'Module.load(path)',
  'mmap-program': 'Program.load(path, { mmap: true }) -> Module.load(program)',
  'mmap-module': 'Module.load(path, { mmap: true })',
  'bytes-module': 'Module.load(readFileSync(path))',
};

async function loadChild(mode, path, warmUpPath) {
  const { Module, Program } = await import('../dist/index.js');
  // Loads the addon and starts the thread pool, so the timing below is the load alone.
  await (await Module.load(readFileSync(warmUpPath))).dispose();
  const index = { dtype: 'int64', shape: [1], data: BigInt64Array.of(7n) };
  const options = { mmap: mode.startsWith('mmap') };
  let bytes;
  if (mode.startsWith('bytes')) bytes = readFileSync(path);
  globalThis.gc?.();
  const before = rssBytes('VmRSS');
  const start = performance.now();
  const module = mode.endsWith('program') ? await Module.load(Program.load(path, options)) : await Module.load(bytes ?? path, options);
  const loadMs = performance.now() - start;
  const afterLoad = rssBytes('VmRSS');
  const row = (await module.execute('row', [index]))[0].data;
  globalThis.gc?.();
  const afterRun = rssBytes('VmRSS');
  // Keeps the caller's copy alive to here, so growth counts only what loading added.
  if (bytes !== undefined && bytes.byteLength === 0) throw new Error('empty program file');
  process.stdout.write(
    JSON.stringify({
      mode,
      loadMs,
      loadGrowth: afterLoad - before,
      steadyGrowth: afterRun - before,
      peak: rssBytes('VmHWM'),
      check: row[0],
    }) + '\n',
  );
  await module.dispose();
}

// ns per executeSync call, best of several rounds, copied and mapped alternating.
async function callChild(path, calls) {
  const { Module, Tensor } = await import('../dist/index.js');
  const copied = await Module.load(path);
  const mapped = await Module.load(path, { mmap: true });
  const x = Tensor.float32([4], [1, 2, 3, 4]);
  const best = { copied: Infinity, mapped: Infinity };
  for (let round = 0; round < 7; round++) {
    for (const [name, module] of [
      ['copied', copied],
      ['mapped', mapped],
    ]) {
      const start = process.hrtime.bigint();
      for (let i = 0; i < calls; i++) module.executeSync('forward', [x]);
      best[name] = Math.min(best[name], Number(process.hrtime.bigint() - start) / calls);
    }
  }
  process.stdout.write(JSON.stringify(best) + '\n');
}

function runChild(args) {
  const run = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--child', ...args], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`${args[0]}: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').pop());
}

async function parent() {
  const { values } = parseArgs({ options: { mib: { type: 'string', default: '100' }, calls: { type: 'string', default: '20000' } } });
  const { ProgramBuilder } = await import('../dist/export/index.js');
  const cols = 1024;
  const rows = Math.round((Number(values.mib) * 1024 * 1024) / (cols * 4));
  const table = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) table[r * cols] = r;
  const program = new ProgramBuilder();
  const weights = program.constant('table', 'float32', [rows, cols], table);
  program.method('row', (m) => m.output(m.embedding(weights, m.input('index', 'int64', [1]))));
  const tiny = new ProgramBuilder();
  tiny.method('forward', (m) => m.output(m.add(m.input('x', 'float32', [4]), 1)));
  const dir = mkdtempSync(join(tmpdir(), 'etna-mapped-load-'));
  const path = join(dir, 'big-constants.pte');
  const tinyPath = join(dir, 'add.pte');
  writeFileSync(path, program.toPte());
  writeFileSync(tinyPath, tiny.toPte());
  const results = [];
  // Two rounds, alternating, so page-cache state and noise hit every mode alike.
  for (let round = 0; round < 2; round++) {
    for (const mode of Object.keys(LOADS)) {
      const result = runChild(['load', mode, path, tinyPath]);
      if (result.check !== 7) throw new Error(`${mode}: wrong row ${result.check}`);
      results.push(result);
    }
  }
  const perCall = runChild(['calls', tinyPath, values.calls]);
  rmSync(dir, { recursive: true, force: true });
  const mib = (b) => (b / (1024 * 1024)).toFixed(1);
  console.log(`program with ${mib(rows * cols * 4)} MiB of constants; best of 2 rounds per mode`);
  console.log('| load | load ms | RSS growth at load, MiB | RSS growth after a call and gc, MiB | peak RSS MiB |');
  console.log('| --- | --- | --- | --- | --- |');
  for (const [mode, label] of Object.entries(LOADS)) {
    const best = results.filter((r) => r.mode === mode).sort((a, b) => a.loadMs - b.loadMs)[0];
    console.log(`| ${label} | ${best.loadMs.toFixed(1)} | ${mib(best.loadGrowth)} | ${mib(best.steadyGrowth)} | ${mib(best.peak)} |`);
  }
  console.log(`\nexecuteSync of a one-add program, ${values.calls} calls, best of 7 rounds`);
  console.log('| program | ns per call |');
  console.log('| --- | --- |');
  console.log(`| copied (default) | ${perCall.copied.toFixed(0)} |`);
  console.log(`| mapped: one fstat per call checks the file | ${perCall.mapped.toFixed(0)} |`);
  console.log(`| difference | ${(perCall.mapped - perCall.copied).toFixed(0)} |`);
}

if (process.argv[2] === '--child') {
  if (process.argv[3] === 'load') await loadChild(process.argv[4], process.argv[5], process.argv[6]);
  else await callChild(process.argv[4], Number(process.argv[5]));
} else {
  await parent();
}
