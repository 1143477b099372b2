// Resident set over load/execute/dispose cycles of a 16 MiB program (one
// [1024, 4096] float32 weight in a linear layer), one way of loading per run,
// without --expose-gc: what a server that reloads its model sees.
//   node bench/dispose-rss.mjs [--source program-path|program-bytes|program-mmap|module-path|module-bytes|module-mmap|all]
//                              [--cycles 120] [--from 20] [--xnnpack] [--forget] [--stop-above MiB]
// --forget skips dispose(): the native memory then goes only when V8
// collects the objects, which its external-memory accounting prompts.
// --stop-above ends the run early once RSS has grown by that much since
// cycle --from (so a leaking build fails fast instead of filling memory).
// Prints one JSON line per source: RSS at cycle --from and at the end, the
// growth between them, the peak growth, cycles run and seconds.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const SOURCES = ['program-path', 'program-bytes', 'program-mmap', 'module-path', 'module-bytes', 'module-mmap'];
const IN_FEATURES = 4096;
const OUT_FEATURES = 1024;

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const source = option('--source', 'all');
const cycles = Number(option('--cycles', 120));
const from = Number(option('--from', 20));
const xnnpack = args.includes('--xnnpack');
const forget = args.includes('--forget');
const stopAbove = Number(option('--stop-above', Number.POSITIVE_INFINITY));

if (source === 'all') {
  // Each source in a process of its own, so that one does not shape the next one's heap.
  for (const each of SOURCES) {
    const child = spawnSync(process.execPath, [fileURLToPath(import.meta.url), ...args, '--source', each], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    process.stdout.write(child.stdout);
    if (child.status !== 0) process.exitCode = 1;
  }
} else {
  const { Module, Program, Tensor } = await import(pathToFileURL(path.join(repoRoot, 'dist/index.js')).href);
  const { ProgramBuilder } = await import(pathToFileURL(path.join(repoRoot, 'dist/export/index.js')).href);
  const builder = new ProgramBuilder();
  const weight = builder.constant(
    'weight',
    'float32',
    [OUT_FEATURES, IN_FEATURES],
    new Float32Array(OUT_FEATURES * IN_FEATURES).fill(0.25),
  );
  builder.method('forward', (m) => {
    m.output(m.linear(m.input('x', 'float32', [1, IN_FEATURES]), weight));
  });
  const bytes = builder.toPte({ xnnpack });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-dispose-rss-'));
  const file = path.join(dir, 'linear.pte');
  fs.writeFileSync(file, bytes);
  const x = Tensor.float32([1, IN_FEATURES], new Float32Array(IN_FEATURES).fill(1));

  const load = {
    'program-path': () => Module.load(Program.load(file)),
    'program-bytes': () => Module.load(Program.load(bytes)),
    'program-mmap': () => Module.load(Program.load(file, { mmap: true })),
    'module-path': () => Module.load(file),
    'module-bytes': () => Module.load(bytes),
    'module-mmap': () => Module.load(file, { mmap: true }),
  }[source];
  if (load === undefined) throw new Error(`unknown --source ${source} (one of ${SOURCES.join(', ')}, all)`);

  const MiB = 1024 * 1024;
  const started = performance.now();
  let fromRss = 0;
  let peakRss = 0;
  let ran = 0;
  for (let i = 0; i < cycles; i++, ran++) {
    const rss = process.memoryUsage().rss;
    if (i === from) fromRss = rss;
    if (i >= from) {
      peakRss = Math.max(peakRss, rss);
      if (rss - fromRss > stopAbove * MiB) break;
    }
    const module = await load();
    const [y] = await module.execute('forward', [x]);
    if (y.data[0] !== IN_FEATURES * 0.25) throw new Error(`wrong output ${y.data[0]}`);
    if (!forget) {
      await module.dispose();
      module.program.dispose();
    }
  }
  const toRss = process.memoryUsage().rss;
  peakRss = Math.max(peakRss, toRss);
  fs.rmSync(dir, { recursive: true, force: true });
  console.log(
    JSON.stringify({
      source,
      xnnpack,
      forget,
      cycles: ran,
      fromMiB: Math.round(fromRss / MiB),
      toMiB: Math.round(toRss / MiB),
      grownMiB: Math.round((toRss - fromRss) / MiB),
      peakGrownMiB: Math.round((peakRss - fromRss) / MiB),
      seconds: Number(((performance.now() - started) / 1000).toFixed(1)),
    }),
  );
}
