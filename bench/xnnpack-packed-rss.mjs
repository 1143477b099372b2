// Peak memory of a lowered program whose k methods all use the same linear
// weight W (1024x1024 float32, 4 MiB): with packed weights shared per module,
// going from k = 1 to k = 4 methods must cost well under W (target: < 10%).
// Each measurement is a fresh child process reading VmHWM before loading and
// after every method has run once.
//
//   node bench/xnnpack-packed-rss.mjs [--repeats N]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const FEATURES = 1024;
const WEIGHT_BYTES = FEATURES * FEATURES * 4;
const here = fileURLToPath(import.meta.url);

function peakRssBytes() {
  const match = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return Number(match[1]) * 1024;
}

async function child(file, methods) {
  const { Module, Tensor } = await import('../dist/index.js');
  const input = Tensor.float32([1, FEATURES], new Float32Array(FEATURES).fill(0.5));
  const before = peakRssBytes();
  const module = await Module.load(file, { shareMemoryArenas: true });
  for (let k = 0; k < methods; k++) await module.execute(`forward${k}`, [input]);
  const after = peakRssBytes();
  const report = module.memoryReport();
  await module.dispose();
  process.stdout.write(
    JSON.stringify({
      methods,
      before,
      after,
      growth: after - before,
      packedWeightBytes: report.packedWeightBytes,
      workspaceBytes: report.workspaceBytes,
    }),
  );
}

async function parent() {
  const repeatsIndex = process.argv.indexOf('--repeats');
  const repeats = repeatsIndex >= 0 ? Number(process.argv[repeatsIndex + 1]) : 3;
  const { ProgramBuilder } = await import('../dist/export/index.js');
  const { randomValues } = await import('./xnnpack-models.mjs');
  const weight = randomValues(FEATURES * FEATURES, 21, 0.05);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-packed-rss-'));
  const rows = [];
  try {
    for (const methods of [1, 4]) {
      const program = new ProgramBuilder();
      const w = program.constant('shared.weight', 'float32', [FEATURES, FEATURES], weight);
      for (let k = 0; k < methods; k++) program.method(`forward${k}`, (m) => m.output(m.linear(m.input('x', 'float32', [1, FEATURES]), w)));
      const file = path.join(dir, `k${methods}.pte`);
      fs.writeFileSync(file, program.toPte({ xnnpack: true }));
      const runs = [];
      for (let r = 0; r < repeats; r++)
        runs.push(JSON.parse(execFileSync(process.execPath, [here, '--child', file, String(methods)], { encoding: 'utf8' })));
      runs.sort((a, b) => a.growth - b.growth);
      rows.push({ ...runs[Math.floor(runs.length / 2)], fileBytes: fs.statSync(file).size });
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const mib = (b) => (b / 2 ** 20).toFixed(2);
  console.log(`W = ${mib(WEIGHT_BYTES)} MiB; median of ${repeats} child processes each.\n`);
  console.log('| methods k | .pte MiB | packedWeightBytes | VmHWM before load MiB | VmHWM after all methods ran MiB | growth MiB |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const r of rows)
    console.log(`| ${r.methods} | ${mib(r.fileBytes)} | ${r.packedWeightBytes} | ${mib(r.before)} | ${mib(r.after)} | ${mib(r.growth)} |`);
  const extra = rows[1].growth - rows[0].growth;
  console.log(
    `\ngrowth(k=4) - growth(k=1) = ${(extra / 1024).toFixed(0)} KiB = ${((100 * extra) / WEIGHT_BYTES).toFixed(1)}% of W (target < 10%): ${extra < 0.1 * WEIGHT_BYTES ? 'met' : 'NOT met'}`,
  );
}

if (process.argv[2] === '--child') await child(process.argv[3], Number(process.argv[4]));
else await parent();
