// Many calls in flight at once: across methods, modules and one shared
// Program; dispose() after queued and running calls; per-module state kept
// apart under interleaving; a process that exits with calls still running.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { EtnaError, Module, Program, Tensor, type Value } from '../../lib/index.js';
import { Xorshift32 } from '../../lib/random.js';
import { exportExample } from '../../lib/tools/examples/index.js';
import { repoRoot, testdataPath } from '../helpers/testdata.js';

const SOFTMAX_SHAPE = [2, 4096];

/** Deterministic pseudo-random floats (no Math.random: failures must replay). */
function floats(count: number, seed: number): number[] {
  const random = new Xorshift32((seed * 2654435761) >>> 0 || 1);
  return Array.from({ length: count }, () => ((random.nextUint32() % 20001) - 10000) / 1000);
}

function f32(shape: number[], values: number[]): Tensor {
  return Tensor.float32(shape, values);
}

function arrays(values: Value[]): number[][] {
  return values.map((value) => {
    expect(value).toBeInstanceOf(Tensor);
    return (value as Tensor).toArray();
  });
}

interface Call {
  module: Module;
  method: string;
  inputs: Tensor[];
}

/** Calls for et_add, npr_multi_method (both methods) and the softmax program, by seed. */
function callFor(modules: { add: Module; multi: Module; softmax: Module }, seed: number): Call {
  switch (seed % 4) {
    case 0:
      return { module: modules.add, method: 'forward', inputs: [f32([1], floats(1, seed)), f32([1], floats(1, seed + 1))] };
    case 1:
      return { module: modules.multi, method: 'double', inputs: [f32([2], floats(2, seed))] };
    case 2:
      return { module: modules.multi, method: 'forward', inputs: [f32([2], floats(2, seed))] };
    default:
      return { module: modules.softmax, method: 'forward', inputs: [f32(SOFTMAX_SHAPE, floats(2 * 4096, seed))] };
  }
}

async function loadSet(share: boolean | 'auto') {
  return {
    add: await Module.load(testdataPath('et_add.pte'), { shareMemoryArenas: share }),
    multi: await Module.load(testdataPath('npr_multi_method.pte'), { shareMemoryArenas: share }),
    softmax: await Module.load(testdataPath('et_softmax_pr17248.pte'), { shareMemoryArenas: share }),
  };
}

async function disposeSet(set: Record<string, Module>): Promise<void> {
  await Promise.all(Object.values(set).map((m) => m.dispose()));
}

describe('concurrent execute', () => {
  it('gives every interleaved call across methods and modules the result of the same call made alone', async () => {
    const reference = await loadSet('auto');
    const seeds = Array.from({ length: 64 }, (_, i) => i);
    const expected = seeds.map((seed) => {
      const call = callFor(reference, seed);
      return arrays(call.module.executeSync(call.method, call.inputs));
    });
    await disposeSet(reference);

    for (const share of [true, false] as const) {
      const set = await loadSet(share);
      // All 64 calls start before any finishes: four modules' queues run on the pool together.
      const results = await Promise.all(
        seeds.map((seed) => {
          const call = callFor(set, seed);
          return call.module.execute(call.method, call.inputs);
        }),
      );
      results.forEach((result, i) => expect(arrays(result), `seed ${i}, share ${share}`).toEqual(expected[i]));
      await disposeSet(set);
    }
  });

  it('serves timers and I/O while it watches for a stream of short calls, and mixes in long ones', async () => {
    // Short calls are watched for on each turn of the event loop instead of
    // sleeping: the loop must still turn, and every call get its own result.
    const set = await loadSet(true);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    let immediates = 0;
    const immediate = () => {
      immediates++;
      if (immediates < 1000) setImmediate(immediate);
    };
    setImmediate(immediate);
    const started = performance.now();
    let calls = 0;
    try {
      while (calls < 2000 || performance.now() - started < 20) {
        const [sum] = await set.add.execute('forward', [f32([1], [calls]), f32([1], [0.5])]);
        expect((sum as Tensor).data[0]).toBe(calls + 0.5);
        if (calls % 500 === 0) {
          const [soft] = await set.softmax.execute('forward', [f32(SOFTMAX_SHAPE, floats(8192, calls))]);
          expect((soft as Tensor).data.length).toBe(8192);
        }
        calls++;
      }
    } finally {
      clearInterval(timer);
    }
    expect(ticks).toBeGreaterThan(0);
    expect(immediates).toBe(1000);
    await disposeSet(set);
  });

  it('runs many modules over one Program in parallel with independent results', async () => {
    const program = Program.load(testdataPath('et_softmax_pr17248.pte'));
    const modules = await Promise.all(Array.from({ length: 8 }, () => Module.load(program)));
    const solo = await Module.load(program);
    const inputs = Array.from({ length: 24 }, (_, i) => f32(SOFTMAX_SHAPE, floats(2 * 4096, 100 + i)));
    const expected = inputs.map((input) => arrays(solo.executeSync('forward', [input])));
    await solo.dispose();

    const results = await Promise.all(inputs.map((input, i) => (modules[i % modules.length] as Module).execute('forward', [input])));
    results.forEach((result, i) => expect(arrays(result)).toEqual(expected[i]));
    // Each row of a softmax sums to one: a cross-module mix-up would not.
    for (const [out] of results) {
      const data = (out as Tensor).data as Float32Array;
      for (let row = 0; row < 2; row++) {
        const sum = data.subarray(row * 4096, (row + 1) * 4096).reduce((a, b) => a + b, 0);
        expect(sum).toBeCloseTo(1, 3);
      }
    }
    await Promise.all(modules.map((m) => m.dispose()));
  });

  it('keeps modules that share one Program and hold state apart while their calls interleave', async () => {
    const program = Program.load(exportExample('gru-stream'));
    const frames = Array.from({ length: 12 }, (_, i) => f32([1, 16], floats(16, 500 + i)));

    // Sequential reference: reset, then each frame in order on one module.
    const solo = await Module.load(program, { shareMemoryArenas: true });
    await solo.execute('reset');
    const expected: number[][] = [];
    for (const frame of frames) expected.push(arrays(await solo.execute('step', [frame]))[0] as number[]);
    await solo.dispose();

    const modules = await Promise.all(Array.from({ length: 4 }, () => Module.load(program, { shareMemoryArenas: true })));
    // Every module queues reset and all its steps at once; the pool interleaves the modules.
    const streams = modules.map((m) => {
      void m.execute('reset');
      return Promise.all(frames.map((frame) => m.execute('step', [frame])));
    });
    const outputs = await Promise.all(streams);
    for (const perModule of outputs) {
      expect(perModule.map((result) => arrays(result)[0])).toEqual(expected);
    }
    await Promise.all(modules.map((m) => m.dispose()));
  });

  it('completes every call made before dispose() and rejects the one made after it, however they race', async () => {
    const input = f32(SOFTMAX_SHAPE, floats(2 * 4096, 7));
    const reference = await Module.load(testdataPath('et_softmax_pr17248.pte'));
    const [expected] = arrays(reference.executeSync('forward', [input]));
    await reference.dispose();

    // Dispose at several points: before the first call runs, during, and after some finish.
    for (const delayCalls of [0, 1, 5, 20]) {
      const m = await Module.load(testdataPath('et_softmax_pr17248.pte'));
      const calls = Array.from({ length: 30 }, () => m.execute('forward', [input]));
      if (delayCalls > 0) await Promise.allSettled(calls.slice(0, Math.min(delayCalls, 3)));
      const disposing = m.dispose();
      const late = m.execute('forward', [input]).catch((error: unknown) => error);
      const outcomes = await Promise.allSettled(calls);
      await disposing;
      for (const outcome of outcomes) {
        expect(outcome.status).toBe('fulfilled');
        expect(arrays((outcome as PromiseFulfilledResult<Value[]>).value)[0]).toEqual(expected);
      }
      expect(await late).toMatchObject({ code: 'DISPOSED' });

      expect(() => m.executeSync('forward', [input])).toThrow(EtnaError);
      expect(() => m.memoryReport()).toThrow(/disposed/);
      await m.dispose();
    }
  });

  it('disposes many modules at once while each has calls queued', async () => {
    const program = Program.load(testdataPath('npr_multi_method.pte'));
    const modules = await Promise.all(Array.from({ length: 6 }, (_, i) => Module.load(program, { shareMemoryArenas: i % 2 === 0 })));
    const calls = modules.flatMap((m) =>
      Array.from({ length: 10 }, (_, i) => m.execute(i % 2 ? 'double' : 'forward', [f32([2], [i, -i])])),
    );
    await Promise.all(modules.map((m) => m.dispose()));
    const outcomes = await Promise.allSettled(calls);
    for (const [i, outcome] of outcomes.entries()) {
      const k = i % 10;
      expect(outcome.status).toBe('fulfilled');
      expect(arrays((outcome as PromiseFulfilledResult<Value[]>).value)[0]).toEqual([k + 1, -k + 1]);
    }
    // The program outlives its modules and still loads new ones.
    const again = await Module.load(program);
    expect(arrays(await again.execute('forward', [f32([2], [1, 2])]))[0]).toEqual([2, 3]);
    await again.dispose();
  });
});

const distIndex = path.join(repoRoot, 'dist/index.js');

function runChild(source: string): { status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string } {
  expect(fs.existsSync(distIndex), 'dist/index.js is missing: run npm run build:ts').toBe(true);
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', source], {
    cwd: repoRoot,
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr };
}

describe('process exit with calls in flight', () => {
  const preamble = `
    import { Module, Tensor } from ${JSON.stringify(distIndex)};
    const input = Tensor.float32([2, 4096], new Float32Array(8192).fill(0.5));
    const modules = await Promise.all([0, 1, 2, 3].map(() => Module.load(${JSON.stringify(testdataPath('et_softmax_pr17248.pte'))})));
    let settled = 0;
    for (const m of modules) for (let i = 0; i < 50; i++) m.execute('forward', [input]).then(() => settled++, () => settled++);
  `;

  it('exits with code 0 when process.exit() runs while calls are on the pool', () => {
    const result = runChild(`${preamble}
      await new Promise((resolve) => setImmediate(resolve));
      console.log('exiting with', 200 - settled, 'calls unsettled');
      process.exit(0);
    `);
    expect(result.stderr).toBe('');
    expect(result.signal).toBeNull();
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/exiting with \d+ calls unsettled/);
  });

  it('exits with code 0 when dispose() is called but never awaited', () => {
    const result = runChild(`${preamble}
      for (const m of modules) m.dispose();
      process.on('exit', () => console.log('settled', settled));
    `);
    expect(result.stderr).toBe('');
    expect(result.signal).toBeNull();
    expect(result.status).toBe(0);
    // Nothing keeps the loop alive but the calls themselves: every one settles before exit.
    expect(result.stdout.trim()).toBe('settled 200');
  });

  it('exits with code 0 when the main thread throws with calls in flight', () => {
    const result = runChild(`${preamble}
      process.on('uncaughtException', () => process.exit(0));
      setImmediate(() => { throw new Error('boom'); });
    `);
    expect(result.signal).toBeNull();
    expect(result.status).toBe(0);
  });
});
