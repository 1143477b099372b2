// What a call takes and when: inputs are taken when execute() is called,
// everything checkable is refused before anything runs (and leaves state
// alone), dispose() lets earlier calls finish, and memoryReport() is safe and
// counts constants once while calls run.
import { describe, expect, it } from 'vitest';

import { Module, Program, Tensor, type Value } from '../../lib/index.js';
import { exportExample } from '../../lib/tools/examples/index.js';
import { testdataPath } from '../helpers/testdata.js';
import { rejection } from '../helpers/errors.js';

function first(values: Value[]): number[] {
  expect(values[0]).toBeInstanceOf(Tensor);
  return (values[0] as Tensor).toArray();
}

// A deterministic 16-value frame for gru-stream's step.
function frame(seed: number): Tensor {
  return Tensor.float32(
    [1, 16],
    Array.from({ length: 16 }, (_, i) => Math.sin(seed * 7 + i)),
  );
}

describe('inputs are taken when execute() is called', () => {
  it('gives each of several queued calls over one reused array the value it had at its call', async () => {
    const m = await Module.load(testdataPath('et_add.pte'));
    const buffer = new Float32Array(1);
    const one = Tensor.float32([1], [1]);
    const calls: Promise<Value[]>[] = [];
    for (let k = 0; k <= 4; k++) {
      buffer[0] = k;
      calls.push(m.execute('forward', [new Tensor('float32', [1], buffer), one]));
    }
    expect((await Promise.all(calls)).map((result) => first(result)[0])).toEqual([1, 2, 3, 4, 5]);
    await m.dispose();
  });

  it('ignores a change to the input array right after a single call returns', async () => {
    const m = await Module.load(testdataPath('et_add.pte'));
    const a = new Float32Array([2]);
    const call = m.execute('forward', [new Tensor('float32', [1], a), Tensor.float32([1], [3])]);
    a[0] = 100;
    expect(first(await call)).toEqual([5]);
    await m.dispose();
  });

  it('ignores the change for unplanned inputs (delegate reads them) and for a method not loaded yet', async () => {
    const unplanned = await Module.load(testdataPath('djl_add_unplanned_xnnpack.pte'));
    const x = new Float32Array([1.5]);
    const call = unplanned.execute('forward', [new Tensor('float32', [1], x), Tensor.float32([1], [2])]);
    x[0] = -40;
    expect(first(await call)).toEqual([3.5]);
    await unplanned.dispose();

    // Without sharing, a method loads with its first call, on the worker.
    const lazy = await Module.load(testdataPath('npr_multi_method.pte'), { shareMemoryArenas: false });
    const v = new Float32Array([1, 2]);
    const doubled = lazy.execute('double', [new Tensor('float32', [2], v)]);
    v.fill(9);
    expect(first(await doubled)).toEqual([2, 3]); // this program's 'double' adds one
    await lazy.dispose();
  });
});

describe('a refused call changes nothing', () => {
  it('refuses a too-small or wrong-type output array with INVALID_INPUT before the step runs', async () => {
    const bytes = exportExample('gru-stream');
    const m = await Module.load(bytes);
    await m.execute('step', [frame(1)]);

    const small = await rejection(m.execute('step', [frame(2)], { outputs: [new Float32Array(2)] }));
    expect(small.code).toBe('INVALID_INPUT');
    expect(small.message).toMatch(/output 0 .*needs 32 bytes.*holds 8/);
    const wrongType = await rejection(m.execute('step', [frame(2)], { outputs: [new Float64Array(8)] }));
    expect(wrongType.code).toBe('INVALID_INPUT');
    expect(wrongType.message).toMatch(/needs a Float32Array/);
    expect(() => m.executeSync('step', [frame(2)], { outputs: [new Float32Array(7)] })).toThrow(/needs 32 bytes/);
    const notArray = await rejection(m.execute('step', [frame(2)], { outputs: new Float32Array(8) as unknown as Float32Array[] }));
    expect(notArray.code).toBe('INVALID_INPUT');

    // The hidden state is where one step left it: a fresh module given the
    // same two frames agrees with this one's next step.
    const out = new Float32Array(8);
    const [stepped] = await m.execute('step', [frame(2)], { outputs: [out] });
    const fresh = await Module.load(bytes);
    await fresh.execute('step', [frame(1)]);
    const expected = first(await fresh.execute('step', [frame(2)]));
    expect((stepped as Tensor).toArray()).toEqual(expected);
    expect(Array.from(out)).toEqual(expected);
    await Promise.all([m.dispose(), fresh.dispose()]);
  });
});

describe('dispose()', () => {
  it('completes a call made before it and refuses one made after it', async () => {
    const m = await Module.load(testdataPath('et_add.pte'));
    const before = m.execute('forward', [Tensor.float32([1], [1]), Tensor.float32([1], [2])]);
    const disposing = m.dispose();
    const after = rejection(m.execute('forward', [Tensor.float32([1], [1]), Tensor.float32([1], [2])]));
    expect(first(await before)).toEqual([3]);
    expect((await after).code).toBe('DISPOSED');
    await disposing;
  });
});

describe('memoryReport()', () => {
  it('counts constants read by several methods once, with each method listed beside', async () => {
    const bytes = exportExample('kv-decoder');
    const stored = Program.load(bytes).describe().constants.bytes; // what `etna inspect --json` prints
    const m = await Module.load(bytes);
    const report = m.memoryReport();
    expect(report.constantBytes).toBe(stored);
    expect(report.methods.map((method) => method.name)).toEqual(['prefill', 'decode', 'reset']);
    const summed = report.methods.reduce((sum, method) => sum + method.constantBytes, 0);
    expect(summed).toBeGreaterThan(stored); // prefill and decode read the same weights
    expect(report.methods.map((method) => method.constantBytes)).toEqual(
      m.program.describe().methods.map((method) => method.constantBytes),
    );
    await m.dispose();

    const multi = await Module.load(testdataPath('npr_multi_method.pte'));
    expect(multi.memoryReport().constantBytes).toBe(Program.load(testdataPath('npr_multi_method.pte')).describe().constants.bytes);
    await multi.dispose();
  });

  it('answers while calls load methods and grow workspaces on many modules', async () => {
    const program = Program.load(exportExample('kv-decoder', { xnnpack: true }));
    const stored = program.describe().constants.bytes;
    // Unshared: each method loads (arenas, delegates, workspaces) inside its first call.
    const modules = await Promise.all(Array.from({ length: 4 }, () => Module.load(program, { shareMemoryArenas: false })));
    const tokens = Tensor.int64([1, 8], [1, 2, 3, 4, 5, 6, 7, 8]);
    const calls = modules.flatMap((m) => [
      m.execute('prefill', [tokens, Tensor.int64([1], [0])]),
      m.execute('decode', [Tensor.int64([1, 1], [9]), Tensor.int64([1], [8])]),
    ]);
    let done = false;
    void Promise.allSettled(calls).then(() => (done = true));
    const planned = modules.map(() => 0);
    let reports = 0;
    while (!done) {
      for (const [i, m] of modules.entries()) {
        const report = m.memoryReport();
        expect(report.constantBytes).toBe(stored);
        expect(report.plannedBytes).toBeGreaterThanOrEqual(planned[i]!); // arenas only ever appear
        planned[i] = report.plannedBytes;
        reports++;
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    for (const outcome of await Promise.allSettled(calls)) expect(outcome.status).toBe('fulfilled');
    expect(reports).toBeGreaterThan(0);
    for (const m of modules) {
      const report = m.memoryReport();
      expect(
        report.arenas
          .map((arena) => arena.methods)
          .flat()
          .sort(),
      ).toEqual(['decode', 'decode', 'prefill', 'prefill']);
      expect(report.workspaceBytes).toBeGreaterThan(0);
    }
    await Promise.all(modules.map((m) => m.dispose()));
  });
});
