// The addon in worker_threads: each worker loads its own Module (the addon is
// loaded once per thread), results match the main thread, and workers that
// are terminated or exit with calls in flight take nothing down with them.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';

import { Module, Tensor } from '../../lib/index.js';
import { repoRoot, testdataPath } from '../helpers/testdata.js';

const distIndex = path.join(repoRoot, 'dist/index.js');

interface WorkerReport {
  results?: number[][];
  error?: string;
}

/** Runs an ESM body in a worker with `Module`, `Tensor` and `workerData` in scope. */
function startWorker(body: string, workerData: unknown): Worker {
  expect(fs.existsSync(distIndex), 'dist/index.js is missing: run npm run build:ts').toBe(true);
  const source = `
    import { parentPort, workerData } from 'node:worker_threads';
    import { Module, Tensor } from ${JSON.stringify(pathToFileURL(distIndex).href)};
    ${body}
  `;
  const url = new URL(`data:text/javascript,${encodeURIComponent(source)}`);
  return new Worker(url, { workerData });
}

function runWorker(body: string, workerData: unknown): Promise<{ report: WorkerReport | undefined; exitCode: number }> {
  return new Promise((resolve, reject) => {
    const worker = startWorker(body, workerData);
    let report: WorkerReport | undefined;
    worker.on('message', (message: WorkerReport) => {
      report = message;
    });
    worker.on('error', reject);
    worker.on('exit', (exitCode) => resolve({ report, exitCode }));
  });
}

function inputsFor(seed: number): number[] {
  return Array.from({ length: 8192 }, (_, i) => Math.sin(seed * 131 + i) * 5);
}

// Loads the softmax program, runs one call per seed, posts every result.
const softmaxWorker = `
  const m = await Module.load(workerData.path, { shareMemoryArenas: workerData.share });
  const calls = workerData.seeds.map((seed) =>
    m.execute('forward', [Tensor.float32([2, 4096], Array.from({ length: 8192 }, (_, i) => Math.sin(seed * 131 + i) * 5))]));
  const results = (await Promise.all(calls)).map(([t]) => Array.from(t.data));
  await m.dispose();
  parentPort.postMessage({ results });
`;

describe('modules in worker_threads', () => {
  it('loads the addon in several workers at once and matches main-thread results', async () => {
    const main = await Module.load(testdataPath('et_softmax_pr17248.pte'));
    const seedsPerWorker = [
      [1, 2, 3],
      [4, 5, 6],
      [7, 8, 9],
      [10, 11, 12],
    ];
    const expected = seedsPerWorker.map((seeds) =>
      seeds.map((seed) =>
        Array.from((main.executeSync('forward', [Tensor.float32([2, 4096], inputsFor(seed))])[0] as Tensor).data as Float32Array),
      ),
    );

    // The main thread keeps calling its own module while the workers run.
    const mainCalls = Promise.all([20, 21, 22].map((seed) => main.execute('forward', [Tensor.float32([2, 4096], inputsFor(seed))])));
    const runs = await Promise.all(
      seedsPerWorker.map((seeds, i) =>
        runWorker(softmaxWorker, { path: testdataPath('et_softmax_pr17248.pte'), seeds, share: i % 2 === 0 }),
      ),
    );
    runs.forEach((run, i) => {
      expect(run.exitCode).toBe(0);
      expect(run.report?.error).toBeUndefined();
      expect(run.report?.results).toEqual(expected[i]);
    });
    expect((await mainCalls).length).toBe(3);
    await main.dispose();
  });

  it('runs both methods of a multi-method program with shared arenas inside a worker', async () => {
    const { report, exitCode } = await runWorker(
      `
      const m = await Module.load(workerData.path, { shareMemoryArenas: true });
      const results = [];
      for (const name of ['double', 'forward', 'double']) {
        const [y] = await m.execute(name, [Tensor.float32([2], [1, -4])]);
        results.push(Array.from(y.data));
      }
      await m.dispose();
      parentPort.postMessage({ results });
    `,
      { path: testdataPath('npr_multi_method.pte') },
    );
    expect(exitCode).toBe(0);
    expect(report?.results).toEqual([
      [2, -3],
      [2, -3],
      [2, -3],
    ]);
  });

  it('survives workers terminated while their calls are running', () => {
    // Run in a child process: if terminating a worker brings the process down,
    // that is this test failing rather than the test runner's worker dying.
    expect(fs.existsSync(distIndex), 'dist/index.js is missing: run npm run build:ts').toBe(true);
    const workerSource = `
      import { parentPort, workerData } from 'node:worker_threads';
      import { Module, Tensor } from ${JSON.stringify(pathToFileURL(distIndex).href)};
      const m = await Module.load(workerData);
      const input = Tensor.float32([2, 4096], new Float32Array(8192).fill(1));
      for (let i = 0; i < 200; i++) m.execute('forward', [input]).catch(() => {});
      // Keeps the worker alive until terminate(), even if every call finishes first.
      setInterval(() => {}, 1000);
      parentPort.postMessage('running');
    `;
    const parentSource = `
      import { Worker } from 'node:worker_threads';
      import { Module, Tensor } from ${JSON.stringify(pathToFileURL(distIndex).href)};
      const url = new URL('data:text/javascript,' + encodeURIComponent(${JSON.stringify(workerSource)}));
      for (let round = 0; round < 3; round++) {
        const workers = [0, 1, 2].map(() => new Worker(url, { workerData: ${JSON.stringify(testdataPath('et_softmax_pr17248.pte'))} }));
        const codes = await Promise.all(workers.map((w) => new Promise((resolve, reject) => {
          w.on('error', reject);
          w.once('message', () => void w.terminate());
          w.on('exit', resolve);
        })));
        console.log('round', round, 'exit codes', codes.join(','));
      }
      // The addon still works on the main thread afterwards.
      const m = await Module.load(${JSON.stringify(testdataPath('et_add.pte'))});
      const [y] = await m.execute('forward', [Tensor.float32([1], [2]), Tensor.float32([1], [3])]);
      console.log('after', y.toArray().join(','));
      await m.dispose();
    `;
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', parentSource], { encoding: 'utf8', timeout: 60_000 });
    expect(result.stderr).toBe('');
    expect(result.signal).toBeNull();
    expect(result.status).toBe(0);
    // terminate() ends a worker with exit code 1.
    expect(result.stdout.trim().split('\n')).toEqual([
      'round 0 exit codes 1,1,1',
      'round 1 exit codes 1,1,1',
      'round 2 exit codes 1,1,1',
      'after 5',
    ]);
  });

  it('ends workers, by terminate() or on their own, while their JS thread watches for short calls', () => {
    // A stream of short calls keeps the worker's event loop turning without
    // sleeping; its handles must close with the worker's environment.
    expect(fs.existsSync(distIndex), 'dist/index.js is missing: run npm run build:ts').toBe(true);
    const workerSource = `
      import { parentPort, workerData } from 'node:worker_threads';
      import { Module, Tensor } from ${JSON.stringify(pathToFileURL(distIndex).href)};
      const m = await Module.load(workerData.path);
      let sum = 0;
      for (let i = 0; sum >= 0; i++) {
        const [y] = await m.execute('forward', [Tensor.float32([1], [i]), Tensor.float32([1], [1])]);
        sum += y.data[0];
        if (i === 200) parentPort.postMessage(y.data[0]);
        if (i === 400 && !workerData.stream) break;
      }
    `;
    const parentSource = `
      import { Worker } from 'node:worker_threads';
      import { Module, Tensor } from ${JSON.stringify(pathToFileURL(distIndex).href)};
      const url = new URL('data:text/javascript,' + encodeURIComponent(${JSON.stringify(workerSource)}));
      const path = ${JSON.stringify(testdataPath('et_add.pte'))};
      for (const stream of [true, false]) {
        const workers = [0, 1].map(() => new Worker(url, { workerData: { path, stream } }));
        const ends = await Promise.all(workers.map((w) => new Promise((resolve, reject) => {
          let seen;
          w.on('error', reject);
          w.once('message', (value) => { seen = value; if (stream) void w.terminate(); });
          w.on('exit', (code) => resolve(seen + ':' + code));
        })));
        console.log(stream ? 'terminated' : 'finished', ends.join(','));
      }
      const m = await Module.load(path);
      const [y] = await m.execute('forward', [Tensor.float32([1], [2]), Tensor.float32([1], [3])]);
      console.log('after', y.toArray().join(','));
    `;
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', parentSource], { encoding: 'utf8', timeout: 60_000 });
    expect(result.stderr).toBe('');
    expect(result.signal).toBeNull();
    expect(result.status).toBe(0);
    // The main thread's module is not disposed: its last call leaves nothing that keeps the process alive.
    expect(result.stdout.trim().split('\n')).toEqual(['terminated 201:1,201:1', 'finished 201:0,201:0', 'after 5']);
  });

  it('lets a worker finish on its own after dispose() with calls queued', async () => {
    const { report, exitCode } = await runWorker(
      `
      const m = await Module.load(workerData.path);
      const input = Tensor.float32([2, 4096], new Float32Array(8192).fill(2));
      const calls = Array.from({ length: 50 }, () => m.execute('forward', [input]));
      m.dispose();
      const outcomes = await Promise.allSettled(calls);
      // [fulfilled, rejected with DISPOSED]
      parentPort.postMessage({ results: [[
        outcomes.filter((o) => o.status === 'fulfilled').length,
        outcomes.filter((o) => o.status === 'rejected' && o.reason.code === 'DISPOSED').length,
      ]] });
    `,
      { path: testdataPath('et_softmax_pr17248.pte') },
    );
    expect(exitCode).toBe(0);
    // Every call was made before dispose(), so every call ran.
    expect(report?.results).toEqual([[50, 0]]);
  });
});
