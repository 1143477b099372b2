// dispose() gives a program's and a module's native memory back at once, on
// every way of loading, and a program or module nobody disposes is still
// collected as its native memory grows (V8 is told about it). Each run loads
// a 16 MiB program (one [1024, 4096] float32 weight in a linear layer,
// lowered to XNNPACK, so its weights are packed too) 120 or 300 times in a
// child process of its own, without --expose-gc: nothing forces a
// collection, as in a server that reloads its model.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { repoRoot } from '../helpers/testdata.js';

const SCRIPT = path.join(repoRoot, 'bench/dispose-rss.mjs');

interface Run {
  source: string;
  cycles: number;
  grownMiB: number;
  peakGrownMiB: number;
}

// One child running bench/dispose-rss.mjs; its one line of JSON.
function cycles(source: string, extra: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SCRIPT, '--source', source, '--xnnpack', ...extra], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`${source}: exit ${code}\n${stderr}`));
      else resolve(JSON.parse(stdout) as Run);
    });
  });
}

const LIMIT_MIB = 48;

describe('dispose() frees at once', () => {
  // Program.load from a path, from bytes and mapped, each with Module.load over
  // it; Module.load from a path, from bytes and mapped.
  const SOURCES = ['program-path', 'program-bytes', 'program-mmap', 'module-path', 'module-bytes', 'module-mmap'];

  it(`120 cycles of load, execute and dispose grow the resident set by less than ${LIMIT_MIB} MiB from cycle 20 on, for every way of loading`, async () => {
    // In parallel: each child measures only itself.
    const runs = await Promise.all(
      SOURCES.map((source) => cycles(source, ['--cycles', '120', '--from', '20', '--stop-above', String(2 * LIMIT_MIB)])),
    );
    const grown = Object.fromEntries(runs.map((run) => [run.source, run.grownMiB]));
    for (const run of runs) {
      expect(run.cycles, `${run.source} stopped early: ${JSON.stringify(grown)}`).toBe(120);
      expect(run.peakGrownMiB, `${run.source}: ${JSON.stringify(grown)}`).toBeLessThan(LIMIT_MIB);
    }
  }, 180_000);
});

describe('a program and module nobody disposes', () => {
  it('are collected as their native memory grows: 300 cycles without dispose() keep the resident set bounded', async () => {
    // Each cycle leaves 32 MiB behind (the program's copy and its packed
    // weights) until a collection; without V8 knowing, nothing would prompt one.
    const run = await cycles('module-path', ['--forget', '--cycles', '300', '--from', '20', '--stop-above', '512']);
    expect(run.cycles).toBe(300);
    expect(run.peakGrownMiB).toBeLessThan(256);
  }, 180_000);
});
