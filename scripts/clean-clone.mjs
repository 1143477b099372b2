// The suites in a fresh clone (npm run test:clean-clone): clones the committed
// HEAD into a temporary folder with nothing beside it, runs the README's setup
// there (scripts/setup.sh), then the native and vitest suites, records every
// test's result in build/test-results/clean-clone.json, and fails on any
// failure or skip. It shows, before a push, that the repository carries every
// fixture its tests read; CI gets the same proof by running `test:all` in a
// fresh clone, so `test:all` does not run it a second time.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { SUITES } from './test-summary.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outFile = path.join(repoRoot, 'build/test-results/clean-clone.json');

function run(command, args, cwd, env) {
  console.log(`clean-clone: ${command} ${args.join(' ')}`);
  const child = spawnSync(command, args, { cwd, env, stdio: 'inherit' });
  if (child.error) throw child.error;
  return child.status ?? 1;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-clean-clone-'));
const clone = path.join(work, 'etna');
// Nothing of this checkout's environment points the clone at outside files.
const env = { ...process.env };
delete env.ETNA_TESTDATA;
delete env.ETNA_ONNX_TESTDATA;

const results = [];
try {
  if (run('git', ['clone', '--quiet', '--no-hardlinks', repoRoot, clone], work, env) !== 0) throw new Error('git clone failed');
  if (run('bash', ['scripts/setup.sh'], clone, env) !== 0) throw new Error('scripts/setup.sh failed in the clone');
  for (const [suiteName, command, args] of [
    ['native', 'bash', ['scripts/test-native.sh']],
    ['vitest', 'npm', ['run', 'test:js']],
  ]) {
    const status = run(command, args, clone, env);
    const suite = SUITES.find((entry) => entry.name === suiteName);
    const file = path.join(clone, suite.file);
    if (!fs.existsSync(file)) {
      results.push({ name: `${suiteName}: no results (exit ${status})`, status: 'failed' });
      continue;
    }
    for (const entry of suite.read(fs.readFileSync(file, 'utf8')))
      results.push({ name: `${suiteName} > ${entry.name}`, status: entry.status });
    if (status !== 0 && !results.some((entry) => entry.status === 'failed'))
      results.push({ name: `${suiteName}: exit ${status}`, status: 'failed' });
  }
} catch (error) {
  results.push({ name: String(error.message ?? error), status: 'failed' });
} finally {
  fs.mkdirSync(path.dirname(outFile), { recursive: true });
  fs.writeFileSync(outFile, JSON.stringify({ clone, results }, null, 1));
  fs.rmSync(work, { recursive: true, force: true });
}
const count = (status) => results.filter((entry) => entry.status === status).length;
console.log(`clean-clone: ${count('passed')} passed, ${count('failed')} failed, ${count('skipped')} skipped`);
process.exitCode = count('failed') === 0 && count('skipped') === 0 ? 0 : 1;
