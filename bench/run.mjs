// `npm run bench`: every benchmark, from the compiled package (run `npm run build:ts` first).
// Extra arguments go to `etna bench` (for example --quick). Results land in bench/results/.
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';

const out = 'bench/results';
mkdirSync(out, { recursive: true });
const steps = [
  [
    'dist/cli/etna.js',
    'bench',
    ...process.argv.slice(2),
    '--json',
    `${out}/bench.json`,
    '--md',
    `${out}/bench.md`,
    '--svg',
    `${out}/bench.svg`,
  ],
  ['bench/call-overhead.mjs'],
  ['bench/mapped-load.mjs'],
  ['bench/xnnpack-bench.mjs', ...(process.argv.includes('--quick') ? ['--quick'] : []), '--json', `${out}/xnnpack.json`],
  ['bench/onnx-silero.mjs'],
];
let failed = 0;
for (const args of steps) {
  console.log(`\n$ node ${args.join(' ')}`);
  const run = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (run.status !== 0) failed++;
}
process.exitCode = failed === 0 ? 0 : 1;
