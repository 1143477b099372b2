// Deterministic freeing: Program.dispose(), a module's dispose() taking its
// implicit program with it, `using` / `await using`, and modules that outlive
// the Program they were loaded over.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

import { ProgramBuilder } from '../../lib/export/index.js';
import { Module, Program, Tensor, type Value } from '../../lib/index.js';
import { repoRoot, testdataPath } from '../helpers/testdata.js';
import { rejection, thrown } from '../helpers/errors.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-dispose-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const ADD = testdataPath('et_add.pte');
const MiB = 1024 * 1024;

const add = (m: Module, a: number, b: number): Promise<Value[]> => m.forward([Tensor.float32([1], [a]), Tensor.float32([1], [b])]);
const first = (values: Value[]): number => (values[0] as Tensor).toArray()[0]!;

// A program with `MiB` float32 weights of 4 MiB: its copy is what a leak would keep.
function bigProgram(): string {
  const program = new ProgramBuilder();
  const weights = program.constant('w', 'float32', [MiB], new Float32Array(MiB).fill(0.5));
  program.method('forward', (m) => {
    m.output(m.add(weights, m.input('x', 'float32', [1])));
  });
  const file = path.join(dir, 'big.pte');
  fs.writeFileSync(file, program.toPte());
  return file;
}

describe('Program.dispose', () => {
  it('refuses describe() and Module.load(program) afterwards with DISPOSED; disposing twice does nothing', async () => {
    const program = Program.load(ADD);
    program.dispose();
    program.dispose();
    expect(thrown(() => program.describe()).code).toBe('DISPOSED');
    const refused = await rejection(Module.load(program));
    expect(refused.code).toBe('DISPOSED');
    expect(refused.message).toMatch(/Module.load: the program has been disposed/);
  });

  it('keeps modules over it running: the program is freed with its last module', async () => {
    const program = Program.load(ADD);
    const a = await Module.load(program);
    const b = await Module.load(program);
    program.dispose();
    expect(first(await add(a, 1, 2))).toBe(3);
    await a.dispose();
    expect(first(await add(b, 4, 5))).toBe(9);
    expect(b.methodMeta('forward').inputs).toHaveLength(2);
    expect(b.memoryReport().mode).toBeDefined();
    await b.dispose();
    expect((await rejection(add(b, 1, 1))).code).toBe('DISPOSED');
  });

  it('a Program.dispose() while Module.load(program) is loading leaves the load whole', async () => {
    const program = Program.load(ADD);
    const loading = Module.load(program);
    program.dispose();
    const module = await loading;
    expect(first(await add(module, 2, 2))).toBe(4);
    await module.dispose();
  });
});

describe('a module that loaded its own program', () => {
  it('disposes that program with itself; a module over a given Program leaves it alone', async () => {
    const owner = await Module.load(ADD);
    await owner.dispose();
    expect(thrown(() => owner.program.describe()).code).toBe('DISPOSED');

    const bytes = await Module.load(fs.readFileSync(ADD));
    const borrowed = await Module.load(bytes.program);
    await bytes.dispose();
    // The module over it keeps the memory alive and keeps running.
    expect(first(await add(borrowed, 1, 1))).toBe(2);
    await borrowed.dispose();

    const program = Program.load(ADD);
    const user = await Module.load(program);
    await user.dispose();
    expect(program.describe().methods[0]!.name).toBe('forward');
    program.dispose();
  });

  it('waits for calls made before dispose(), which still see their program', async () => {
    const module = await Module.load(ADD);
    const calls = [add(module, 1, 1), add(module, 2, 2)];
    const disposed = module.dispose();
    expect((await Promise.all(calls)).map(first)).toEqual([2, 4]);
    await disposed;
  });
});

describe('a disposed module', () => {
  it('refuses every method and accessor with DISPOSED, and its program too when it loaded it', async () => {
    const module = await Module.load(ADD);
    await add(module, 1, 1);
    await module.dispose();
    const x = Tensor.float32([1], [1]);
    const sync: [string, () => unknown][] = [
      ['methodNames', () => module.methodNames],
      ['inputNames', () => module.inputNames],
      ['outputNames', () => module.outputNames],
      ['inputNamesOf', () => module.inputNamesOf('forward')],
      ['outputNamesOf', () => module.outputNamesOf('forward')],
      ['methodMeta', () => module.methodMeta('forward')],
      ['memoryReport', () => module.memoryReport()],
      ['executeSync', () => module.executeSync('forward', [x, x])],
      ['startProfiling', () => module.startProfiling()],
      ['endProfiling', () => module.endProfiling()],
      ['takeProfile', () => module.takeProfile()],
      ['program.describe', () => module.program.describe()],
      ['program.methodNames', () => module.program.methodNames],
    ];
    for (const [name, use] of sync) expect(thrown(use).code, name).toBe('DISPOSED');
    const async: [string, () => Promise<unknown>][] = [
      ['execute', () => module.execute('forward', [x, x])],
      ['forward', () => module.forward([x, x])],
      ['run', () => module.run({ x, y: x })],
      ['run(method)', () => module.run('forward', { x, y: x })],
      ['Module.load(program)', () => Module.load(module.program)],
    ];
    for (const [name, use] of async) expect((await rejection(use())).code, name).toBe('DISPOSED');
    // Disposing again does nothing.
    await module.dispose();
  });
});

describe('using', () => {
  it('Symbol.dispose and Symbol.asyncDispose dispose programs and modules', async () => {
    const program = Program.load(ADD);
    program[Symbol.dispose]();
    expect(thrown(() => program.describe()).code).toBe('DISPOSED');
    const other = Program.load(ADD);
    await other[Symbol.asyncDispose]();
    expect(thrown(() => other.describe()).code).toBe('DISPOSED');

    const module = await Module.load(ADD);
    const call = add(module, 3, 4);
    // The synchronous form starts dispose(): calls made before it finish, later ones are refused.
    module[Symbol.dispose]();
    expect((await rejection(add(module, 1, 1))).code).toBe('DISPOSED');
    expect(first(await call)).toBe(7);
    expect(thrown(() => module.program.describe()).code).toBe('DISPOSED');
  });

  it('`using` and `await using` declarations free at the end of the scope', async () => {
    let kept: Program | undefined;
    let keptModule: Module | undefined;
    {
      using program = Program.load(ADD);
      await using module = await Module.load(program);
      expect(first(await add(module, 1, 2))).toBe(3);
      kept = program;
      keptModule = module;
    }
    expect(thrown(() => kept!.describe()).code).toBe('DISPOSED');
    expect((await rejection(add(keptModule!, 1, 1))).code).toBe('DISPOSED');
  });
});

describe('memory after dispose', () => {
  // The cycles run in a child process whose glibc maps every allocation of
  // 128 KiB and more on its own and unmaps it when freed (a fixed threshold),
  // so the resident set shows what is still allocated rather than what the
  // allocator keeps for reuse.
  const CYCLES = `
    import { Module, Program, Tensor } from ${JSON.stringify(pathToFileURL(path.join(repoRoot, 'dist/index.js')).href)};
    const file = process.argv[1];
    const x = Tensor.float32([1], [1]);
    for (let i = 0; i < 5; i++) {
      const module = await Module.load(file);
      await module.forward([x]);
      await module.dispose();
    }
    const before = process.memoryUsage().rss;
    for (let i = 0; i < 100; i++) {
      const module = await Module.load(file);
      if (i % 10 === 0 && (await module.forward([x]))[0].data[7] !== 1.5) throw new Error('wrong output');
      await module.dispose();
    }
    for (let i = 0; i < 100; i++) {
      const program = Program.load(file);
      const module = await Module.load(program);
      program.dispose();
      await module.dispose();
    }
    console.log(JSON.stringify({ grownMiB: (process.memoryUsage().rss - before) / ${MiB} }));
  `;

  it('200 load/dispose cycles of a 4 MiB program keep the resident set bounded', () => {
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', CYCLES, bigProgram()], {
      encoding: 'utf8',
      env: { ...process.env, MALLOC_MMAP_THRESHOLD_: '131072' },
      timeout: 120_000,
    });
    expect(child.status, child.stderr).toBe(0);
    const { grownMiB } = JSON.parse(child.stdout) as { grownMiB: number };
    // Kept until garbage collection, the first 100 cycles alone would hold 100 copies (400 MiB).
    expect(grownMiB).toBeLessThan(100);
  }, 120_000);
});
