// numThreads draws on the process's thread pools: 64 sessions at numThreads 2
// start one pool worker between them (not 64), compute what a lone module
// computes while they all run at once, and threadPool: 'own' gives a module
// workers of its own, gone with it.
//
// Threads are counted in /proc/self/task. The count taken before includes
// what Node already runs (V8's platform threads, libuv's pool, which a load
// starts) and etna's call threads (which calls at once on one-thread modules
// have started, up to UV_THREADPOOL_SIZE), so the difference is the pool
// workers etna adds.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

import { Module, Program, Tensor, type ModuleOptions } from '../../lib/index.js';
import { Lcg } from '../../lib/random.js';
import { rejection } from '../helpers/errors.js';
import { repoRoot, testdataPath } from '../helpers/testdata.js';

const CONV = testdataPath('djl_conv_xnnpack.pte'); // XNNPACK Conv2d, float32[1, 3, 16, 16] -> [1, 8, 16, 16]
const SESSIONS = 64;
const INPUTS = 8;
const cores = os.cpus().length;
const CALL_THREADS = Number(process.env.UV_THREADPOOL_SIZE || 4);

const processThreads = (): number => fs.readdirSync('/proc/self/task').length;
/** etna's call threads, by the name they give themselves (a thread may end while it is read). */
const callThreads = (): number =>
  fs.readdirSync('/proc/self/task').filter((task) => {
    try {
      return fs.readFileSync(`/proc/self/task/${task}/comm`, 'utf8').trim() === 'etna-call';
    } catch {
      return false;
    }
  }).length;

/** Deterministic inputs, different for each index. */
function convInput(index: number): Tensor {
  return Tensor.float32([1, 3, 16, 16], new Lcg((index + 1) * 2654435761).signedFloat32(3 * 16 * 16));
}

async function convOutput(module: Module, index: number): Promise<Float32Array> {
  const [output] = await module.forward([convInput(index)]);
  return (output as Tensor).data as Float32Array;
}

/**
 * Starts every call thread execute() may use: rounds of more one-thread modules
 * calling at once than there are such threads, until all have started (how many
 * calls overlap depends on the machine's timing).
 */
async function startCallThreads(): Promise<void> {
  const modules = await Promise.all(Array.from({ length: 2 * CALL_THREADS }, () => Module.load(CONV, { numThreads: 1 })));
  for (let round = 0; round < 200 && callThreads() < CALL_THREADS; round++) {
    await Promise.all(modules.map((module, i) => convOutput(module, i + round)));
  }
  expect(callThreads()).toBe(CALL_THREADS);
  await Promise.all(modules.map((module) => module.dispose()));
}

describe('the process thread pool', () => {
  it('64 sessions at numThreads 2 add at most cores + 1 threads and match lone runs', async () => {
    const program = Program.load(CONV);
    // A lone module on the calling thread gives the expected outputs (and starts libuv's pool).
    const lone = await Module.load(program, { numThreads: 1 });
    const expected: Float32Array[] = [];
    for (let i = 0; i < INPUTS; i++) expected.push(await convOutput(lone, i));
    await lone.dispose();
    await startCallThreads();
    const before = processThreads();

    const sessions = await Promise.all(
      Array.from({ length: SESSIONS }, () => Module.load(program, { numThreads: 2, shareMemoryArenas: true })),
    );
    // Every session calls at once, several times over, each with its own input sequence.
    const outputs = await Promise.all(
      sessions.map(async (session, s) => {
        const got: Float32Array[] = [];
        for (let step = 0; step < 4; step++) got.push(await convOutput(session, (s + step) % INPUTS));
        return got;
      }),
    );
    const added = processThreads() - before;

    outputs.forEach((got, s) =>
      got.forEach((output, step) => expect(output, `session ${s} step ${step}`).toEqual(expected[(s + step) % INPUTS])),
    );
    expect(added).toBeLessThanOrEqual(cores + 1);
    // One shared pool of min(2, cores) threads: its workers are the caller's helpers.
    expect(added).toBe(Math.min(2, cores) - 1);
    await Promise.all(sessions.map((session) => session.dispose()));
    // A pool's workers leave as it is destroyed; the task list may show one a moment longer (seen under emulation).
    await expect.poll(processThreads, { timeout: 5000 }).toBe(before);
    program.dispose();
  });

  it('numThreads 1 adds no thread; a shared pool stops at the cores', async () => {
    await startCallThreads();
    const before = processThreads();
    const single = await Module.load(CONV, { numThreads: 1 });
    await convOutput(single, 0);
    expect(processThreads()).toBe(before);
    const wide = await Module.load(CONV, { numThreads: cores + 3 });
    const wider = await Module.load(CONV, { numThreads: cores + 5 });
    expect(await convOutput(wide, 1)).toEqual(await convOutput(single, 1));
    await convOutput(wider, 1);
    // Both ask for more than the cores: one pool of `cores` threads serves them.
    expect(processThreads() - before).toBe(cores - 1);
    await Promise.all([single.dispose(), wide.dispose(), wider.dispose()]);
    await expect.poll(processThreads, { timeout: 5000 }).toBe(before);
  });

  it("threadPool: 'own' gives a module workers of its own, gone with it", async () => {
    await startCallThreads();
    const before = processThreads();
    const shared = await Module.load(CONV, { numThreads: 2 });
    const own = await Module.load(CONV, { numThreads: 3, threadPool: 'own' });
    expect(await convOutput(own, 2)).toEqual(await convOutput(shared, 2));
    // An own pool has the threads asked for, even past the cores.
    expect(processThreads() - before).toBe(Math.min(2, cores) - 1 + 2);
    await own.dispose();
    await expect.poll(() => processThreads() - before, { timeout: 5000 }).toBe(Math.min(2, cores) - 1);
    await shared.dispose();
    await expect.poll(processThreads, { timeout: 5000 }).toBe(before);
  });

  it('execute() runs on at most UV_THREADPOOL_SIZE call threads, started as calls need them', () => {
    // In a child, so that the variable is read when etna loads: calls on 8 modules at once start 3 call threads, no more.
    const distIndex = path.join(repoRoot, 'dist/index.js');
    expect(fs.existsSync(distIndex), 'dist/index.js is missing: run npm run build:ts').toBe(true);
    const source = `
      import fs from 'node:fs';
      import { Module, Tensor } from ${JSON.stringify(pathToFileURL(distIndex).href)};
      const threads = () => fs.readdirSync('/proc/self/task').length;
      const input = Tensor.float32([1, 3, 16, 16], new Float32Array(768).fill(0.5));
      const modules = await Promise.all(Array.from({ length: 8 }, () => Module.load(${JSON.stringify(CONV)})));
      const before = threads();
      await modules[0].forward([input]);
      const afterOne = threads() - before;
      // Rounds of 8 calls at once until they have needed every call thread (how many
      // overlap depends on the machine's timing), then more rounds: none beyond 3 starts.
      for (let round = 0; round < 200 && threads() - before < 3; round++) {
        await Promise.all(modules.map((m) => m.forward([input])));
      }
      for (let round = 0; round < 5; round++) await Promise.all(modules.map((m) => m.forward([input])));
      const afterMany = threads() - before;
      const named = fs.readdirSync('/proc/self/task').filter((task) => {
        try { return fs.readFileSync('/proc/self/task/' + task + '/comm', 'utf8').trim() === 'etna-call'; } catch { return false; }
      }).length;
      console.log(JSON.stringify({ afterOne, afterMany, named }));
    `;
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', source], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, UV_THREADPOOL_SIZE: '3' },
    });
    expect(result.stderr).toBe('');
    // The call threads name themselves: profilers and top tell them from Node's own.
    expect(JSON.parse(result.stdout)).toEqual({ afterOne: 1, afterMany: 3, named: 3 });
  });

  it('threadPool is refused unless it is shared or own', async () => {
    for (const threadPool of ['private', 'Shared', 1, true]) {
      const error = await rejection(Module.load(CONV, { numThreads: 2, threadPool } as unknown as ModuleOptions));
      expect(error.code, String(threadPool)).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/^Module\.load: threadPool must be 'shared' or 'own', got /);
    }
  });
});
