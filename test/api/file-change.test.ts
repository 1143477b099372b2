// A program loaded from a path must survive whatever happens to its file
// afterwards. By default the file is read into a private copy, so calls keep
// their results; with { mmap: true } a truncated or rewritten file makes calls
// reject with INVALID_PROGRAM, and a file renamed over the path is harmless.
// The file changes run in a child process, whose exit status proves that the
// process survived them.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ProgramBuilder } from '../../lib/export/index.js';
import { EtnaError, Module, Program, Tensor } from '../../lib/index.js';
import { repoRoot, testdataPath } from '../helpers/testdata.js';

const ROWS = 64;
const COLS = 256;

// row(index) returns table[index]; table[r][c] = sign * (1000 r + c). Both
// signs give files of one size whose constants differ.
function tableProgram(sign: 1 | -1): Uint8Array {
  const table = new Float32Array(ROWS * COLS);
  for (let r = 0; r < ROWS; r++) for (let c = 0; c < COLS; c++) table[r * COLS + c] = sign * (1000 * r + c);
  const builder = new ProgramBuilder();
  const weights = builder.constant('table', 'float32', [ROWS, COLS], table);
  builder.method('row', (m) => m.output(m.embedding(weights, m.input('index', 'int64', [1]))));
  return builder.toPte();
}

const ROW3 = [3000, 3001, 3002, 3003];
const ROW3_OTHER = ROW3.map((v) => -v);

let dir = '';
let original: Uint8Array;
let other: Uint8Array;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-file-change-'));
  original = tableProgram(1);
  other = tableProgram(-1);
});

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

let fileCount = 0;
function freshCopy(bytes: Uint8Array | string, ext = '.pte'): string {
  const file = path.join(dir, `copy-${fileCount++}${ext}`);
  if (typeof bytes === 'string') fs.copyFileSync(bytes, file);
  else fs.writeFileSync(file, bytes);
  return file;
}

type Change = 'truncate' | 'overwrite' | 'garbage' | 'cp' | 'rename';

interface ChildRequest {
  file: string;
  /** What to call: 'row' (the table program) or 'xor' (the training program with its .ptd). */
  call: 'row' | 'xor';
  /** How to load: Module.load(path, options), or Module.load(Program.load(path, options)). */
  via: 'module' | 'program';
  options: Record<string, unknown>;
  /** The file to change (the program or its .ptd), how, and the bytes an overwrite writes. */
  target: string;
  change: Change;
  replacement: string;
}

interface Attempt {
  ok?: unknown;
  code?: string;
  message?: string;
}

interface ChildReport {
  before: unknown;
  after: Attempt;
  again: Attempt;
  describe: Attempt;
  memory: Attempt;
  reload: Attempt;
}

const distIndex = path.join(repoRoot, 'dist/index.js');

const childSource = `
  import fs from 'node:fs';
  import { Module, Program, Tensor } from ${JSON.stringify(distIndex)};
  const request = JSON.parse(process.argv[1]);
  const attempt = async (f) => { try { return { ok: await f() }; } catch (e) { return { code: e.code, message: e.message }; } };
  const calls = {
    row: async (m) => (await m.execute('row', [Tensor.int64([1], [3])]))[0].toArray().slice(0, 4),
    xor: async (m) => (await m.execute('forward', [Tensor.float32([1, 2], [1, 0]), Tensor.int64([1], [1])])).slice(0, 4).map((t) => t.toArray()),
  };
  const call = calls[request.call];
  const load = (file) => request.via === 'program' ? Module.load(Program.load(file, request.options)) : Module.load(file, request.options);
  const m = await load(request.file);
  const before = await call(m);
  const { target, replacement } = request;
  switch (request.change) {
    case 'truncate': fs.truncateSync(target, 0); break;
    case 'overwrite': { const fd = fs.openSync(target, 'r+'); fs.writeSync(fd, fs.readFileSync(replacement), 0); fs.closeSync(fd); break; }
    case 'garbage': { const fd = fs.openSync(target, 'r+'); fs.writeSync(fd, Buffer.alloc(fs.statSync(target).size, 0xa5), 0); fs.closeSync(fd); break; }
    case 'cp': fs.copyFileSync(replacement, target); break;
    case 'rename': fs.copyFileSync(replacement, target + '.next'); fs.renameSync(target + '.next', target); break;
  }
  const report = { before };
  report.after = await attempt(() => call(m));
  report.again = await attempt(() => call(m));
  report.describe = await attempt(() => m.program.describe().methods.length);
  report.memory = await attempt(() => m.memoryReport().mode);
  report.reload = await attempt(async () => call(await load(request.file)));
  process.stdout.write(JSON.stringify(report));
`;

function runChild(request: ChildRequest): ChildReport {
  expect(fs.existsSync(distIndex), 'dist/index.js is missing: run npm run build:ts').toBe(true);
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', childSource, JSON.stringify(request)], {
    cwd: repoRoot,
    encoding: 'utf8',
    timeout: 60_000,
  });
  const where = `${request.change} (${JSON.stringify(request.options)}): ${result.stderr}`;
  expect(result.signal, where).toBeNull();
  expect(result.status, where).toBe(0);
  expect(result.stderr, where).toBe('');
  return JSON.parse(result.stdout) as ChildReport;
}

function rowRequest(change: Change, options: Record<string, unknown>, via: 'module' | 'program' = 'module'): ChildRequest {
  const file = freshCopy(original);
  return { file, call: 'row', via, options, target: file, change, replacement: freshCopy(other) };
}

const CHANGED = /changed on disk after it was mapped .*renaming a new file over it/;

describe('a program file that changes after loading', () => {
  it('builds two programs of one size whose constants differ', () => {
    expect(original.byteLength).toBe(other.byteLength);
    expect(Buffer.from(original).equals(Buffer.from(other))).toBe(false);
  });

  for (const via of ['module', 'program'] as const) {
    for (const change of ['truncate', 'overwrite', 'garbage', 'cp', 'rename'] as const) {
      it(`keeps its results after a ${change} by default (${via === 'module' ? 'Module.load(path)' : 'Program.load(path)'})`, () => {
        const report = runChild(rowRequest(change, {}, via));
        expect(report.before).toEqual(ROW3);
        expect(report.after).toEqual({ ok: ROW3 });
        expect(report.again).toEqual({ ok: ROW3 });
        expect(report.describe).toEqual({ ok: 1 });
        expect(report.memory.ok).toBeTypeOf('string');
      });
    }
  }

  for (const via of ['module', 'program'] as const) {
    for (const change of ['truncate', 'overwrite', 'garbage', 'cp'] as const) {
      it(`refuses calls after a ${change} with { mmap: true }, and the process survives (${via})`, () => {
        const request = rowRequest(change, { mmap: true }, via);
        const report = runChild(request);
        expect(report.before).toEqual(ROW3);
        for (const attempt of [report.after, report.again]) {
          expect(attempt.code).toBe('INVALID_PROGRAM');
          expect(attempt.message).toMatch(CHANGED);
          expect(attempt.message).toContain(request.file);
        }
        // Every other change leaves the file at its size: the modification time tells.
        expect(report.after.message).toMatch(change === 'truncate' ? /its size went from \d+ to 0 bytes/ : /it was written in place/);
        // The verified tables are a private copy even when mapped: describing
        // the program and reporting memory still work.
        expect(report.describe).toEqual({ ok: 1 });
        expect(report.memory.ok).toBeTypeOf('string');
      });
    }

    it(`keeps working when a new file is renamed over a mapped one (${via})`, () => {
      const report = runChild(rowRequest('rename', { mmap: true }, via));
      expect(report.before).toEqual(ROW3);
      expect(report.after).toEqual({ ok: ROW3 });
      expect(report.again).toEqual({ ok: ROW3 });
      // A new load sees the new file.
      expect(report.reload).toEqual({ ok: ROW3_OTHER });
    });
  }

  it('loads the new file after a rename by default too', () => {
    const report = runChild(rowRequest('rename', {}));
    expect(report.reload).toEqual({ ok: ROW3_OTHER });
  });
});

describe('a .ptd file that changes after loading', () => {
  function xorRequest(change: Change, options: Record<string, unknown>): ChildRequest {
    const file = freshCopy(testdataPath('et_xor_training.pte'));
    const data = freshCopy(testdataPath('et_xor_training.ptd'), '.ptd');
    return {
      file,
      call: 'xor',
      via: 'module',
      options: { ...options, externalData: data },
      target: data,
      change,
      replacement: freshCopy(testdataPath('et_add.pte')),
    };
  }

  for (const change of ['truncate', 'garbage'] as const) {
    it(`keeps its results after a ${change} by default`, () => {
      const report = runChild(xorRequest(change, {}));
      expect(report.after).toEqual({ ok: report.before });
      expect(report.again).toEqual({ ok: report.before });
    });

    it(`refuses calls after a ${change} with { mmap: true }`, () => {
      const request = xorRequest(change, { mmap: true });
      const report = runChild(request);
      expect(report.after.code).toBe('INVALID_PROGRAM');
      expect(report.after.message).toMatch(CHANGED);
      expect(report.after.message).toContain(request.target);
    });
  }
});

describe('external data from bytes', () => {
  it('accepts the .ptd as an ArrayBuffer or a Buffer at an offset, with the results of the path', async () => {
    const call = async (externalData: string | ArrayBuffer | Buffer): Promise<number[][]> => {
      const m = await Module.load(testdataPath('et_xor_training.pte'), { externalData });
      const outputs = (await m.execute('forward', [Tensor.float32([1, 2], [1, 0]), Tensor.int64([1], [1])])) as Tensor[];
      await m.dispose();
      return outputs.map((t) => t.toArray());
    };
    const data = fs.readFileSync(testdataPath('et_xor_training.ptd'));
    const outer = Buffer.alloc(data.byteLength + 7);
    data.copy(outer, 5);
    const expected = await call(testdataPath('et_xor_training.ptd'));
    expect(await call(outer.subarray(5, 5 + data.byteLength))).toEqual(expected);
    expect(await call(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength))).toEqual(expected);
  });
});

describe('loading from bytes', () => {
  async function row3(m: Module): Promise<number[]> {
    const [out] = await m.execute('row', [Tensor.int64([1], [3])]);
    return (out as Tensor).toArray().slice(0, 4);
  }

  // The program's bytes inside a larger buffer, at an odd offset.
  function embedded(): Buffer {
    const outer = Buffer.alloc(original.byteLength + 41, 0xee);
    outer.set(original, 13);
    return outer.subarray(13, 13 + original.byteLength);
  }

  it('accepts an ArrayBuffer, a Buffer at an offset, a DataView and a typed array of another element type', async () => {
    const exact = original.buffer.slice(original.byteOffset, original.byteOffset + original.byteLength);
    const inside = embedded();
    const sources = [exact, inside, new DataView(inside.buffer, inside.byteOffset, inside.byteLength), new Uint16Array(exact)];
    for (const source of sources) {
      expect(Program.load(source).methodNames).toEqual(['row']);
      const m = await Module.load(source);
      expect(await row3(m)).toEqual(ROW3);
      await m.dispose();
    }
  });

  it('accepts views over a SharedArrayBuffer', async () => {
    const shared = new SharedArrayBuffer(original.byteLength + 8);
    new Uint8Array(shared, 8).set(original);
    for (const source of [new Uint8Array(shared, 8), new DataView(shared, 8)]) {
      expect(Program.load(source).methodNames).toEqual(['row']);
      const m = await Module.load(source);
      expect(await row3(m)).toEqual(ROW3);
      await m.dispose();
    }
  });

  it('copies the bytes once: changing the caller buffer after loading changes nothing', async () => {
    const inside = embedded();
    const program = Program.load(inside);
    const loading = Module.load(inside);
    inside.fill(0);
    const fromModule = await loading;
    const fromProgram = await Module.load(program);
    expect(await row3(fromModule)).toEqual(ROW3);
    expect(await row3(fromProgram)).toEqual(ROW3);
    await fromModule.dispose();
    await fromProgram.dispose();
  });
});

describe('load arguments', () => {
  const expectInvalidInput = (thrown: unknown, pattern: RegExp): void => {
    expect(thrown).toBeInstanceOf(EtnaError);
    expect((thrown as EtnaError).code).toBe('INVALID_INPUT');
    expect((thrown as EtnaError).message).toMatch(pattern);
  };
  const thrownBy = (f: () => unknown): unknown => {
    try {
      f();
    } catch (error) {
      return error;
    }
    return undefined;
  };

  it('rejects bad sources and option types with INVALID_INPUT', async () => {
    const file = freshCopy(original);
    expectInvalidInput(
      thrownBy(() => Program.load(42 as unknown as string)),
      /Program\.load expects a file path, an ArrayBuffer or a view of one.*number 42/,
    );
    expectInvalidInput(
      thrownBy(() => Program.load(file, { mmap: 'yes' as unknown as boolean })),
      /Program\.load: mmap must be a boolean, got 'yes'/,
    );
    expectInvalidInput(
      thrownBy(() => Program.load(file, 5 as unknown as object)),
      /Program\.load: options must be an object, got number 5/,
    );
    expectInvalidInput(
      thrownBy(() => Program.load(file, null as unknown as object)),
      /options must be an object, got null/,
    );
    expectInvalidInput(await Module.load({} as unknown as string).catch((e: unknown) => e), /Module\.load expects a file path.*got Object/);
    expectInvalidInput(
      await Module.load(file, { mmap: 1 as unknown as boolean }).catch((e: unknown) => e),
      /Module\.load: mmap must be a boolean, got number 1/,
    );
    expectInvalidInput(
      await Module.load(file, { externalData: 5 as unknown as string }).catch((e: unknown) => e),
      /externalData expects a file path.*number 5/,
    );
  });

  it('names a missing or unreadable file with INVALID_PROGRAM, copied or mapped', async () => {
    const missing = path.join(dir, 'missing.pte');
    for (const mmap of [false, true]) {
      const fromProgram = thrownBy(() => Program.load(missing, { mmap }));
      const fromModule = await Module.load(missing, { mmap }).catch((e: unknown) => e);
      const fromData = await Module.load(original, { mmap, externalData: missing }).catch((e: unknown) => e);
      for (const error of [fromProgram, fromModule, fromData]) {
        expect(error).toBeInstanceOf(EtnaError);
        expect((error as EtnaError).code).toBe('INVALID_PROGRAM');
        expect((error as EtnaError).message).toContain(`cannot open '${missing}'`);
      }
      const directory = thrownBy(() => Program.load(dir, { mmap }));
      expect((directory as EtnaError).code).toBe('INVALID_PROGRAM');
      expect((directory as EtnaError).message).toContain(`'${dir}' is not a regular file`);
    }
  });

  it('names the file when its bytes are not a program', async () => {
    const bad = freshCopy(new Uint8Array(100));
    for (const mmap of [false, true]) {
      const error = await Module.load(bad, { mmap }).catch((e: unknown) => e);
      expect((error as EtnaError).code).toBe('INVALID_PROGRAM');
      expect((error as EtnaError).message).toMatch(new RegExp(`^${bad.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: not an ExecuTorch program`));
    }
  });
});
