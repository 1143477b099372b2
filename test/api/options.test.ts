// Options are checked before anything is loaded or run: numThreads within its
// limit, unknown keys refused by name, mmap only where a file is given by path;
// and SharedArrayBuffer-backed data works like any other.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';

import { MAX_NUM_THREADS, Module, Program, Tensor, type ModuleOptions } from '../../lib/index.js';
import { testdataPath } from '../helpers/testdata.js';
import { rejection, thrown } from '../helpers/errors.js';

const ADD = testdataPath('et_add.pte');
const XNNPACK_ADD = testdataPath('npr_add_xnnpack.pte');

const one = (v: number): Tensor => Tensor.float32([1], [v]);

describe('numThreads', () => {
  it(`is an integer from 1 to MAX_NUM_THREADS (${MAX_NUM_THREADS}); past it the refusal names the limit`, async () => {
    expect(MAX_NUM_THREADS).toBe(256);
    for (const numThreads of [100000, MAX_NUM_THREADS + 1, 0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '4']) {
      const error = await rejection(Module.load(XNNPACK_ADD, { numThreads } as unknown as ModuleOptions));
      expect(error.code, String(numThreads)).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/^Module.load: numThreads must be an integer from 1 to 256 \(MAX_NUM_THREADS\), got /);
    }
  });

  it('takes the limit itself and anything below it', async () => {
    const atLimit = await Module.load(ADD, { numThreads: MAX_NUM_THREADS });
    expect(((await atLimit.forward([one(1), one(2)]))[0] as Tensor).toArray()).toEqual([3]);
    await atLimit.dispose();
    const delegated = await Module.load(XNNPACK_ADD, { numThreads: 2 });
    expect(delegated.methodNames).toContain('forward');
    await delegated.dispose();
  });
});

describe('unknown options', () => {
  it('Module.load refuses a misspelt key, naming it and the known ones', async () => {
    const error = await rejection(Module.load(ADD, { shareMemoryArena: true } as unknown as ModuleOptions));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toBe(
      "Module.load: unknown option 'shareMemoryArena' (known: 'shareMemoryArenas', 'numThreads', 'threadPool', 'externalData', 'mmap')",
    );
    expect((await rejection(Module.load(ADD, { threads: 2, map: true } as unknown as ModuleOptions))).message).toMatch(
      /unknown options 'threads', 'map'/,
    );
    expect((await rejection(Module.load(ADD, [] as unknown as ModuleOptions))).message).toMatch(/options must be an object, got an array/);
  });

  it('Program.load refuses keys other than mmap', () => {
    const error = thrown(() => Program.load(ADD, { mmap: false, shared: true } as unknown as { mmap: boolean }));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toBe("Program.load: unknown option 'shared' (known: 'mmap')");
  });

  it('execute and run refuse keys other than outputs and profile', async () => {
    const module = await Module.load(ADD);
    const options = { profil: true } as unknown as { profile: boolean };
    expect((await rejection(module.execute('forward', [one(1), one(2)], options))).message).toBe(
      "method 'forward': unknown option 'profil' (known: 'outputs', 'profile')",
    );
    expect(thrown(() => module.executeSync('forward', [one(1), one(2)], options)).code).toBe('INVALID_INPUT');
    const feeds = Object.fromEntries(module.inputNames.map((name, i) => [name, one(i)]));
    expect((await rejection(module.run('forward', feeds, options))).message).toMatch(/run\('forward'\): unknown option 'profil'/);
    await module.dispose();
  });
});

describe('mmap', () => {
  it('is refused when nothing is given by path: a loaded Program or bytes', async () => {
    const program = Program.load(ADD);
    const bytes = fs.readFileSync(ADD);
    for (const attempt of [() => Module.load(program, { mmap: true }), () => Module.load(bytes, { mmap: true })]) {
      const error = await rejection(attempt());
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/^Module.load: mmap maps files given by path; here nothing is/);
    }
    expect(thrown(() => Program.load(bytes, { mmap: true })).message).toMatch(/^Program.load: mmap maps files given by path/);
    program.dispose();
  });

  it('is taken with a Program source when the external data is a path', async () => {
    const program = Program.load(testdataPath('et_xor_training.pte'));
    const module = await Module.load(program, { mmap: true, externalData: testdataPath('et_xor_training.ptd') });
    expect(module.methodNames.length).toBeGreaterThan(0);
    await module.dispose();
    program.dispose();
  });
});

describe('SharedArrayBuffer', () => {
  it('backs inputs and caller output arrays like an ArrayBuffer, on every call path', async () => {
    const module = await Module.load(ADD);
    const shared = new SharedArrayBuffer(16);
    const a = new Float32Array(shared, 0, 1);
    const b = new Float32Array(shared, 4, 1);
    const out = new Float32Array(shared, 8, 1);
    a[0] = 2;
    b[0] = 3.5;
    const inputs = [new Tensor('float32', [1], a), new Tensor('float32', [1], b)];
    const [result] = (await module.forward(inputs, { outputs: [out] })) as Tensor[];
    expect(out[0]).toBe(5.5);
    expect(result!.data.buffer).toBe(shared);
    expect((module.executeSync('forward', inputs)[0] as Tensor).toArray()).toEqual([5.5]);
    // Queued calls keep copies of their inputs; the shared array may change meanwhile.
    const calls = [module.forward(inputs), module.forward(inputs)];
    a[0] = 100;
    expect((await Promise.all(calls)).map((values) => (values[0] as Tensor).toArray()[0])).toEqual([5.5, 5.5]);
    await module.dispose();
  });

  it('Program.load and Module.load take a view of one; the buffer itself is refused with a clear message', async () => {
    const file = fs.readFileSync(ADD);
    const shared = new SharedArrayBuffer(file.length);
    new Uint8Array(shared).set(file);
    const program = Program.load(new Uint8Array(shared));
    const fromProgram = await Module.load(program);
    const fromBytes = await Module.load(new DataView(shared));
    for (const module of [fromProgram, fromBytes]) {
      expect(((await module.forward([one(1), one(2)]))[0] as Tensor).toArray()).toEqual([3]);
      await module.dispose();
    }
    program.dispose();
    const error = thrown(() => Program.load(shared as unknown as ArrayBuffer));
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toBe('Program.load takes a SharedArrayBuffer through a view of it (new Uint8Array(sab)), not the buffer itself');
  });
});
