// Loading maps constants rather than copying them: a program with ~100 MiB of
// constants is loaded from its path and from bytes already in memory, each way
// in its own child process; we report load time and resident-memory growth
// over the process before the load (with bytes, the caller's copy is already in).
// Usage: node bench/mapped-load.mjs [--mib N]
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const rssBytes = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024;

async function child(mode, path) {
  const { Module, Program } = await import('../dist/index.js');
  const index = { dtype: 'int64', shape: [1], data: BigInt64Array.of(7n) };
  let bytes;
  if (mode.startsWith('bytes')) bytes = readFileSync(path);
  globalThis.gc?.();
  const before = rssBytes('VmRSS');
  const start = performance.now();
  let module;
  if (mode.endsWith('program')) {
    const program = Program.load(bytes ?? path);
    module = await Module.load(program);
  } else {
    module = await Module.load(bytes ?? path);
  }
  const loadMs = performance.now() - start;
  const afterLoad = rssBytes('VmRSS');
  const row = (await module.execute('row', [index]))[0].data;
  globalThis.gc?.();
  const afterRun = rssBytes('VmRSS');
  // Keeps the caller's copy alive to here, so growth counts only what loading added.
  if (bytes !== undefined && bytes.byteLength === 0) throw new Error('empty program file');
  process.stdout.write(JSON.stringify({ mode, loadMs, loadGrowth: afterLoad - before, steadyGrowth: afterRun - before, peak: rssBytes('VmHWM'), check: row[0] }) + '\n');
  await module.dispose();
}

async function parent() {
  const { values } = parseArgs({ options: { mib: { type: 'string', default: '100' } } });
  const { ProgramBuilder } = await import('../dist/export/index.js');
  const cols = 1024;
  const rows = Math.round((Number(values.mib) * 1024 * 1024) / (cols * 4));
  const table = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) table[r * cols] = r;
  const program = new ProgramBuilder();
  const weights = program.constant('table', 'float32', [rows, cols], table);
  program.method('row', (m) => m.output(m.embedding(weights, m.input('index', 'int64', [1]))));
  const dir = mkdtempSync(join(tmpdir(), 'etna-mapped-load-'));
  const path = join(dir, 'big-constants.pte');
  writeFileSync(path, program.toPte());
  const self = fileURLToPath(import.meta.url);
  const results = [];
  // Two rounds, alternating, so page-cache state and noise hit every mode alike.
  for (let round = 0; round < 2; round++) {
    for (const mode of ['path-program', 'path-module', 'bytes-program', 'bytes-module']) {
      const run = spawnSync(process.execPath, ['--expose-gc', self, '--child', mode, path], { encoding: 'utf8' });
      if (run.status !== 0) throw new Error(`${mode}: ${run.stderr}`);
      const result = JSON.parse(run.stdout.trim().split('\n').pop());
      if (result.check !== 7) throw new Error(`${mode}: wrong row ${result.check}`);
      results.push(result);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  const mib = (b) => (b / (1024 * 1024)).toFixed(1);
  console.log(`program with ${mib(rows * cols * 4)} MiB of constants; best of 2 rounds per mode`);
  console.log('| load | load ms | RSS growth at load, MiB | RSS growth after a call and gc, MiB | peak RSS MiB |');
  console.log('| --- | --- | --- | --- | --- |');
  const labels = {
    'path-program': 'Program.load(path) -> Module.load(program)',
    'path-module': 'Module.load(path)',
    'bytes-program': 'Program.load(readFileSync(path)) -> Module.load(program)',
    'bytes-module': 'Module.load(readFileSync(path))',
  };
  for (const mode of Object.keys(labels)) {
    const runs = results.filter((r) => r.mode === mode).sort((a, b) => a.loadMs - b.loadMs);
    const best = runs[0];
    console.log(`| ${labels[mode]} | ${best.loadMs.toFixed(1)} | ${mib(best.loadGrowth)} | ${mib(best.steadyGrowth)} | ${mib(best.peak)} |`);
  }
}

if (process.argv[2] === '--child') await child(process.argv[3], process.argv[4]);
else await parent();
