// Replays every input kept under fuzz/regressions/<target>/ through the public
// API, each in its own child process so that a crash fails its test instead of
// killing the runner. An input must load, or be refused with a typed
// EtnaError; running its methods on zero-filled inputs likewise.
//   fuzz_program          the file is a .pte: Program.load, then Module.load
//                         with shared and unshared arenas, then every method.
//   fuzz_xnnpack_payload  the file is an XnnpackBackend payload: it is wrapped
//                         as the delegate of a one-method program and replayed
//                         the same way.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

import { repoRoot } from '../helpers/testdata.js';

const CODES = [
  'INVALID_PROGRAM',
  'UNSUPPORTED_OPERATOR',
  'UNSUPPORTED_BACKEND',
  'METHOD_NOT_FOUND',
  'INVALID_INPUT',
  'MEMORY_PLAN_CONFLICT',
  'DISPOSED',
  'INTERNAL',
];

const regressionsDir = path.join(repoRoot, 'fuzz/regressions');
const distIndex = path.join(repoRoot, 'dist/index.js');
const distExport = path.join(repoRoot, 'dist/export/index.js');

type Target = 'fuzz_program' | 'fuzz_xnnpack_payload';

interface Outcome {
  step: string;
  ok: boolean;
  code?: string;
  message?: string;
}

// The child: prints one JSON Outcome per line.
const replaySource = `
  import fs from 'node:fs';
import os from 'node:os';
  import { EtnaError, Module, Program, Tensor } from ${JSON.stringify(pathToFileURL(distIndex).href)};
  import { writePte } from ${JSON.stringify(pathToFileURL(distExport).href)};

  const [file, target] = process.argv.slice(1);
  const report = (step, error) => {
    if (error === undefined) console.log(JSON.stringify({ step, ok: true }));
    else if (error instanceof EtnaError) console.log(JSON.stringify({ step, ok: false, code: error.code, message: error.message }));
    else console.log(JSON.stringify({ step, ok: false, code: 'NOT_AN_ETNA_ERROR', message: String(error && error.stack || error) }));
  };

  // A payload becomes the one delegate of 'forward' (two float inputs, one output).
  function wrapPayload(payload) {
    const f32 = (planned) => ({ kind: 'tensor', scalarType: 6, sizes: [1], ...(planned ? { allocation: { memoryId: 1, offset: 0 } } : {}) });
    return writePte({
      methods: [{
        name: 'forward',
        values: [f32(false), f32(false), f32(true)],
        inputs: [0, 1],
        outputs: [2],
        instructions: [{ kind: 'delegate', delegateIndex: 0, args: [0, 1, 2] }],
        operators: [],
        delegates: [{ backendId: 'XnnpackBackend', payload: 0 }],
        nonConstBufferSizes: [0, 128],
      }],
      constants: [],
      delegatePayloads: [payload],
    });
  }

  let bytes = new Uint8Array(fs.readFileSync(file));
  if (target === 'fuzz_xnnpack_payload') bytes = wrapPayload(bytes);

  let program;
  try {
    program = Program.load(bytes);
    report('Program.load');
  } catch (error) {
    report('Program.load', error);
    process.exit(0);
  }
  for (const shareMemoryArenas of [true, false]) {
    let module;
    try {
      module = await Module.load(program, { shareMemoryArenas });
      report('Module.load share=' + shareMemoryArenas);
    } catch (error) {
      report('Module.load share=' + shareMemoryArenas, error);
      continue;
    }
    for (const name of module.methodNames) {
      const step = 'execute ' + name + ' share=' + shareMemoryArenas;
      try {
        const meta = module.methodMeta(name);
        const inputs = meta.inputs.map((input) => {
          switch (input.kind) {
            case 'tensor': return Tensor.zeros(input.dtype, input.shape ?? []);
            case 'int': return 0n;
            case 'double': return 0;
            case 'bool': return false;
            case 'string': return '';
            default: return null;
          }
        });
        await module.execute(name, inputs);
        report(step);
      } catch (error) {
        report(step, error);
      }
    }
    await module.dispose();
  }
`;

function replay(file: string, target: Target): Outcome[] {
  expect(fs.existsSync(distIndex), 'dist/index.js is missing: run npm run build:ts').toBe(true);
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', replaySource, file, target], {
    cwd: repoRoot,
    encoding: 'utf8',
    timeout: 120_000,
  });
  const where = `${path.relative(repoRoot, file)}\n${result.stderr}`;
  expect(result.signal, where).toBeNull();
  expect(result.status, where).toBe(0);
  expect(result.stderr, where).toBe('');
  const outcomes = result.stdout
    .trim()
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Outcome);
  expect(outcomes.length, where).toBeGreaterThan(0);
  for (const outcome of outcomes) {
    if (!outcome.ok) expect(CODES, `${where}: ${outcome.step}: ${outcome.message}`).toContain(outcome.code);
  }
  return outcomes;
}

function regressionFiles(target: Target): string[] {
  const dir = path.join(regressionsDir, target);
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((name) => !name.endsWith('.md') && !name.startsWith('.'))
    .sort()
    .map((name) => path.join(dir, name));
}

describe('fuzz regressions replay through the public API', () => {
  for (const target of ['fuzz_program', 'fuzz_xnnpack_payload'] as const) {
    for (const file of regressionFiles(target)) {
      it(`${target}/${path.basename(file)} loads or fails with a typed error`, () => {
        replay(file, target);
      });
    }
  }

  // The replayer itself: a known-good program runs, a cut-off one is refused.
  it('replays a seed program successfully and a truncated copy as INVALID_PROGRAM', () => {
    const seed = path.join(repoRoot, 'fuzz/corpus/fuzz_program/encoder-decoder.pte');
    const good = replay(seed, 'fuzz_program');
    expect(good.every((outcome) => outcome.ok)).toBe(true);
    expect(good.map((outcome) => outcome.step)).toEqual([
      'Program.load',
      'Module.load share=true',
      'execute encode share=true',
      'execute decode share=true',
      'Module.load share=false',
      'execute encode share=false',
      'execute decode share=false',
    ]);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-fuzz-replay-'));
    try {
      const truncated = path.join(dir, 'truncated.pte');
      fs.writeFileSync(truncated, fs.readFileSync(seed).subarray(0, 200));
      expect(replay(truncated, 'fuzz_program')).toEqual([
        expect.objectContaining({ step: 'Program.load', ok: false, code: 'INVALID_PROGRAM' }),
      ]);

      // A payload that is not a FlatBuffer reaches the backend and is refused there.
      const payload = path.join(dir, 'payload.bin');
      fs.writeFileSync(payload, new Uint8Array(64).fill(0x41));
      const outcomes = replay(payload, 'fuzz_xnnpack_payload');
      expect(outcomes[0]).toEqual({ step: 'Program.load', ok: true });
      expect(outcomes.some((outcome) => !outcome.ok && outcome.code === 'INVALID_PROGRAM')).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
