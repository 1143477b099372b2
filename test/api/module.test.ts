// The Module API on real programs: results, validation, the per-module lock
// and output safety.
import { describe, expect, it } from 'vitest';

import { EtnaError, Module, Program, Tensor, type Value } from '../../lib/index.js';
import { testdataPath } from '../helpers/testdata.js';

function f32(shape: number[], values: number[]): Tensor {
  return Tensor.float32(shape, values);
}

async function expectCode(promise: Promise<unknown>, code: string, message?: RegExp): Promise<EtnaError> {
  const error = await promise.then(
    () => {
      throw new Error(`expected ${code}, call succeeded`);
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(EtnaError);
  expect((error as EtnaError).code).toBe(code);
  if (message) expect((error as EtnaError).message).toMatch(message);
  return error as EtnaError;
}

describe('Module on the real programs', () => {
  it('adds with execute and executeSync', async () => {
    const m = await Module.load(testdataPath('et_add.pte'));
    const [y] = await m.execute('forward', [f32([1], [2]), f32([1], [0.5])]);
    expect(y).toBeInstanceOf(Tensor);
    expect((y as Tensor).dtype).toBe('float32');
    expect((y as Tensor).shape).toEqual([1]);
    expect(Array.from((y as Tensor).data as Float32Array)).toEqual([2.5]);
    const [z] = m.executeSync('forward', [f32([1], [-1]), f32([1], [4])]);
    expect((z as Tensor).toArray()).toEqual([3]);
    const [w] = await m.forward([f32([1], [1]), f32([1], [1])]);
    expect((w as Tensor).toArray()).toEqual([2]);
    await m.dispose();
  });

  it('returns int64 outputs as BigInt64Array', async () => {
    const m = await Module.load(testdataPath('npr_dtypes.pte'));
    const [a, b] = await m.execute('forward', [Tensor.int64([1], [20n]), f32([1], [0.25])]);
    expect((a as Tensor).data).toBeInstanceOf(BigInt64Array);
    expect(Array.from((a as Tensor).data as BigInt64Array)).toEqual([40n]);
    expect((b as Tensor).toArray()).toEqual([0.5]);
    await m.dispose();
  });

  it('runs both methods of npr_multi_method.pte on one module, shared or not', async () => {
    for (const shareMemoryArenas of [true, false, 'auto'] as const) {
      const m = await Module.load(testdataPath('npr_multi_method.pte'), { shareMemoryArenas });
      expect(m.methodNames).toEqual(['double', 'forward']);
      for (const name of ['double', 'forward', 'double']) {
        const [y] = await m.execute(name, [f32([2], [1, -4])]);
        expect((y as Tensor).toArray()).toEqual([2, -3]);
      }
      const report = m.memoryReport();
      expect(report.mode).toBe(shareMemoryArenas === true ? 'shared' : 'unshared');
      expect(report.unsharedPlannedBytes).toBe(96);
      expect(report.plannedBytes).toBe(shareMemoryArenas === true ? 48 : 96);
      await m.dispose();
    }
  });

  it('reports the constant bytes its methods read, as inspect counts them', async () => {
    const path = testdataPath('et_model_constant_buffer.pte');
    const perMethod = Program.load(path)
      .describe()
      .methods.map((method) => method.constantBytes);
    const m = await Module.load(path);
    expect(m.memoryReport().constantBytes).toBeGreaterThan(0);
    expect(m.memoryReport().constantBytes).toBe(perMethod.reduce((a, b) => a + b, 0));
    await m.dispose();
  });

  it('keeps earlier outputs intact when the next call reuses the shared arena', async () => {
    const m = await Module.load(testdataPath('npr_multi_method.pte'), { shareMemoryArenas: true });
    const [y1] = await m.execute('double', [f32([2], [10, 20])]);
    const before = Array.from((y1 as Tensor).data as Float32Array);
    await m.execute('forward', [f32([2], [-7, 8])]);
    expect(Array.from((y1 as Tensor).data as Float32Array)).toEqual(before);
    expect((y1 as Tensor).data.buffer).toBeInstanceOf(ArrayBuffer);
    await m.dispose();
  });

  it('writes into caller-provided outputs', async () => {
    const m = await Module.load(testdataPath('et_add.pte'));
    const out = new Float32Array(1);
    const [y] = await m.execute('forward', [f32([1], [1]), f32([1], [2])], { outputs: [out] });
    expect(out[0]).toBe(3);
    expect((y as Tensor).data.buffer).toBe(out.buffer);
    await expectCode(
      m.execute('forward', [f32([1], [1]), f32([1], [2])], { outputs: [new Int32Array(1)] }),
      'INVALID_INPUT',
      /Float32Array/,
    );
    await m.dispose();
  });

  it('returns outputs as frozen Tensors, and still checks the tensors users build afterwards', async () => {
    const m = await Module.load(testdataPath('et_add.pte'));
    const [y] = await m.execute('forward', [f32([1], [1]), f32([1], [2])]);
    const [z] = m.executeSync('forward', [f32([1], [1]), f32([1], [2])]);
    for (const output of [y, z] as Tensor[]) {
      expect(output).toBeInstanceOf(Tensor);
      expect(Object.isFrozen(output.shape)).toBe(true);
      expect(output.data).toBeInstanceOf(Float32Array);
    }
    // Outputs skip the constructor's checks; a user's tensor made after them does not.
    expect(() => new Tensor('float32', [2], new Float32Array(1))).toThrow(/shape \[2\] holds 2 elements, data has 1/);
    expect(() => new Tensor('float32', [1], new Int32Array(1) as unknown as Float32Array)).toThrow(/Float32Array/);
    await m.dispose();
  });

  it('gives 1,000 concurrent mixed calls the results of the same calls made one by one', async () => {
    const m = await Module.load(testdataPath('npr_multi_method.pte'), { shareMemoryArenas: true });
    const calls = Array.from({ length: 1000 }, (_, i) => ({ method: i % 3 === 0 ? 'forward' : 'double', x: [i, -i / 2] }));
    const concurrent = await Promise.all(calls.map((c) => m.execute(c.method, [f32([2], c.x)])));
    for (const [i, c] of calls.entries()) {
      const [sequential] = m.executeSync(c.method, [f32([2], c.x)]);
      expect((concurrent[i]![0] as Tensor).toArray()).toEqual((sequential as Tensor).toArray());
    }
    await m.dispose();
  });

  it('refuses bad input with a code and a reason, and runs fine afterwards', async () => {
    const m = await Module.load(testdataPath('et_add.pte'));
    await expectCode(m.execute('forward', [f32([1], [1])]), 'INVALID_INPUT', /takes 2 inputs, got 1/);
    await expectCode(
      m.execute('forward', [f32([1], [1]), Tensor.int64([1], [1])]),
      'INVALID_INPUT',
      /input 1: expected float32\[1\], got int64\[1\] \(dtype differs\)/,
    );
    await expectCode(
      m.execute('forward', [f32([2], [1, 2]), f32([1], [1])]),
      'INVALID_INPUT',
      /input 0: expected float32\[1\], got float32\[2\] \(shape differs\)/,
    );
    await expectCode(m.execute('forward', [f32([1], [1]), 3 as unknown as Tensor]), 'INVALID_INPUT', /input 1: expected a tensor/);
    await expectCode(m.execute('backward', []), 'METHOD_NOT_FOUND', /no method named 'backward'.*'forward'/);
    expect(() => m.methodMeta('nope')).toThrow(EtnaError);
    const [y] = await m.execute('forward', [f32([1], [1]), f32([1], [1])]);
    expect((y as Tensor).toArray()).toEqual([2]);
    await m.dispose();
    await expectCode(m.execute('forward', [f32([1], [1]), f32([1], [1])]), 'DISPOSED');
    expect(() => m.executeSync('forward', [])).toThrow(/disposed/);
  });

  it('completes every call made before dispose() and rejects those made after it with DISPOSED', async () => {
    const m = await Module.load(testdataPath('et_softmax_pr17248.pte'));
    const x = Tensor.float32([2, 4096], new Float32Array(8192).fill(1));
    const running = m.execute('forward', [x]);
    await new Promise((resolve) => setImmediate(resolve)); // let the first call start
    const queued = [m.execute('forward', [x]), m.execute('forward', [x])];
    const disposing = m.dispose();
    const late = m.execute('forward', [x]).catch((error: unknown) => error);
    const settled = await Promise.allSettled([running, ...queued]);
    await disposing;
    for (const result of settled) {
      expect(result.status).toBe('fulfilled');
      const [y] = (result as PromiseFulfilledResult<Value[]>).value as [Tensor];
      // softmax of a constant row is uniform
      expect(y.data[0]).toBeCloseTo(1 / 4096, 9);
    }
    expect(await late).toMatchObject({ code: 'DISPOSED' });
    await expect(m.execute('forward', [x])).rejects.toMatchObject({ code: 'DISPOSED' });
  });

  it('describes each method', async () => {
    const m = await Module.load(testdataPath('et_add.pte'));
    const meta = m.methodMeta('forward');
    expect(meta.inputs.map((i) => i.dtype)).toEqual(['float32', 'float32']);
    expect(meta.operators).toEqual(['aten::add.out']);
    expect(meta.memoryPlan).toEqual([0, 48]);
    await m.dispose();
  });

  it('shares one frozen description per program: changing it cannot change how calls are checked', async () => {
    const program = Program.load(testdataPath('et_add.pte'));
    const [a, b] = [await Module.load(program), await Module.load(program)];
    const meta = a.methodMeta('forward');
    expect(b.methodMeta('forward')).toBe(meta);
    expect(Object.isFrozen(meta.inputs[0]!.shape)).toBe(true);
    expect(() => (meta.inputs[0]!.shape as number[]).push(7)).toThrow(TypeError);
    // describe() still hands out a fresh, mutable copy.
    const fresh = program.describe().methods[0]!;
    expect(fresh).not.toBe(meta);
    expect(Object.isFrozen(fresh)).toBe(false);
    await expect(b.execute('forward', [Tensor.float32([1], [1]), Tensor.float32([1], [2])])).resolves.toHaveLength(1);
    await Promise.all([a.dispose(), b.dispose()]);
  });

  it('refuses invalid options', async () => {
    await expect(Module.load(testdataPath('et_add.pte'), { shareMemoryArenas: 'yes' as unknown as boolean })).rejects.toThrow(
      /shareMemoryArenas/,
    );
    await expect(Module.load(testdataPath('et_add.pte'), { numThreads: 0 })).rejects.toThrow(/numThreads/);
  });
});
