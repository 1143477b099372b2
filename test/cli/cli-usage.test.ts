// The CLI's contract with scripts: --help exits 0, bad usage prints the
// usage and exits 2, every failure is one line `etna COMMAND: CODE: message`
// with exit 1 and no stack trace.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { positionalCounts } from '../../lib/cli/command.js';
import { runInChild } from '../../lib/tools/bench/harness.js';
import { runCli, type CliResult } from '../helpers/cli.js';
import { testdataPath } from '../helpers/testdata.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-cli-usage-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const COMMANDS = ['inspect', 'run', 'generate', 'import-onnx', 'export-example', 'demo', 'bench'];

function expectOneLineFailure(result: CliResult, command: string, code: string, message: RegExp): void {
  expect(result.status, result.stderr).toBe(1);
  expect(result.stdout).toBe('');
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^etna ${command}: ${code}: \\S`));
  expect(lines[0]).toMatch(message);
  expect(result.stderr).not.toMatch(/\n\s+at /);
}

describe('etna --help and usage', () => {
  for (const command of COMMANDS) {
    it(`${command} --help prints its usage, one line per option, and exits 0`, () => {
      const result = runCli([command, '--help']);
      expect(result.status, result.stderr).toBe(0);
      expect(result.stderr).toBe('');
      expect(result.stdout).toMatch(new RegExp(`^usage: etna ${command} `));
      const options = result.stdout.split('\n').filter((line) => /^ {2}(-\w, )?--[\w-]+/.test(line));
      expect(options.at(-1)).toMatch(/--help\s+print this help/);
      // Each option line carries its own description.
      for (const line of options) expect(line).toMatch(/^ {2}\S.*\S {2,}\S/);
      const names = options.map((line) => /--([\w-]+)/.exec(line)![1]);
      expect(new Set(names).size).toBe(names.length);
    });
  }

  it('run lists every option it accepts', () => {
    const help = runCli(['run', '--help']).stdout;
    const options = ['--method', '--inputs', '--calls', '--external-data', '--share', '--fill', '--seed', '--full', '--report', '--json'];
    for (const option of options) {
      expect(help).toContain(`  ${option}`);
    }
  });

  it('an unknown option prints the usage on stderr and exits 2', () => {
    const result = runCli(['run', testdataPath('et_add.pte'), '--bogus']);
    expect(result.status).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^etna run: unknown option '--bogus'\n\nusage: etna run FILE/);
  });

  it('a missing argument prints the usage and exits 2', () => {
    const result = runCli(['run']);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^etna run: expected 1 argument \(FILE\), got 0\n\nusage: etna run FILE/);
    expect(runCli(['inspect']).stderr).toMatch(/^etna inspect: expected a FILE \(or --cpu\)\n\nusage: etna inspect \[FILE\]/);
    expect(runCli(['import-onnx', 'model.onnx']).stderr).toMatch(/^etna import-onnx: missing -o OUT\.pte\n\nusage:/);
  });

  it('each command takes the positionals its synopsis shows', () => {
    expect(positionalCounts(undefined)).toEqual({ min: 0, max: 0 });
    expect(positionalCounts('FILE')).toEqual({ min: 1, max: 1 });
    expect(positionalCounts('NAME OUT.pte')).toEqual({ min: 2, max: 2 });
    expect(positionalCounts('MODEL.onnx -o OUT.pte')).toEqual({ min: 1, max: 1 });
    expect(positionalCounts('[FILES.pte...]')).toEqual({ min: 0, max: Number.POSITIVE_INFINITY });
    expect(positionalCounts('FILE [MORE]')).toEqual({ min: 1, max: 2 });
    const extra = runCli(['export-example', 'kv-decoder', 'out.pte', 'third']);
    expect(extra.status).toBe(2);
    expect(extra.stderr).toMatch(/^etna export-example: expected 2 arguments \(NAME OUT\.pte\), got 3/);
    expect(runCli(['demo', 'x']).stderr).toMatch(/^etna demo: expected 0 arguments \(none\), got 1/);
  });

  it('an unknown command lists the commands and exits 2', () => {
    const result = runCli(['frobnicate']);
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/^etna: unknown command 'frobnicate'/);
    for (const command of COMMANDS) expect(result.stderr).toContain(`\n  ${command} `);
  });
});

describe('etna failures are one clean line', () => {
  it('a missing file', () => {
    expectOneLineFailure(runCli(['run', path.join(dir, 'missing.pte')]), 'run', 'INVALID_PROGRAM', /cannot open .*missing\.pte/);
    expectOneLineFailure(runCli(['inspect', path.join(dir, 'missing.pte')]), 'inspect', 'INVALID_PROGRAM', /cannot open .*missing\.pte/);
  });

  it('a corrupt program', () => {
    expectOneLineFailure(runCli(['run', testdataPath('djl_corrupt.pte')]), 'run', 'INVALID_PROGRAM', /not an ExecuTorch program/);
  });

  it('an unknown method', () => {
    expectOneLineFailure(runCli(['run', testdataPath('et_add.pte'), '--method', 'nope']), 'run', 'METHOD_NOT_FOUND', /'nope'/);
  });

  it('an inputs file that is not JSON, or holds the wrong values', () => {
    const notJson = path.join(dir, 'not.json');
    fs.writeFileSync(notJson, '[{"dtype": float32');
    expectOneLineFailure(runCli(['run', testdataPath('et_add.pte'), '--inputs', notJson]), 'run', 'INVALID_INPUT', /not JSON/);
    const wrongDtype = path.join(dir, 'dtype.json');
    fs.writeFileSync(wrongDtype, JSON.stringify([{ dtype: 'float99', shape: [1], data: [1] }, 1]));
    expectOneLineFailure(
      runCli(['run', testdataPath('et_add.pte'), '--inputs', wrongDtype]),
      'run',
      'INVALID_INPUT',
      /inputs\[0\]: unknown dtype "float99"/,
    );
    expectOneLineFailure(
      runCli(['run', testdataPath('et_add.pte'), '--inputs', path.join(dir, 'absent.json')]),
      'run',
      'INVALID_INPUT',
      /cannot read inputs file/,
    );
  });

  it('an option value out of range', () => {
    expectOneLineFailure(
      runCli(['run', testdataPath('et_add.pte'), '--fill', 'sevens']),
      'run',
      'INVALID_INPUT',
      /--fill takes one of zeros, ones, random, got 'sevens'/,
    );
    expectOneLineFailure(runCli(['demo', '--steps', '0']), 'demo', 'INVALID_INPUT', /--steps takes an integer from 1 to/);
  });

  it('every numeric option takes a negative value as its value, and refuses it as out of range in one line', () => {
    const model = testdataPath('et_add.pte');
    const tokenizer = path.join(dir, 'tokenizer.json');
    const generate = ['generate', model, '--tokenizer', tokenizer, '--prompt', 'hi'];
    const cases: [string[], string, RegExp][] = [
      [[...generate, '--temperature', '-1'], 'generate', /--temperature takes a number >= 0, got '-1'/],
      [[...generate, '--temperature', '-0.5'], 'generate', /--temperature takes a number >= 0, got '-0.5'/],
      [[...generate, '--top-p', '-.5'], 'generate', /--top-p takes a number in \(0, 1\], got '-.5'/],
      [[...generate, '--top-k', '-3'], 'generate', /--top-k takes an integer >= 0, got '-3'/],
      [[...generate, '--seed', '-7'], 'generate', /--seed takes an integer from 0 to 4294967295, got '-7'/],
      [[...generate, '--max-new-tokens', '-2'], 'generate', /--max-new-tokens takes an integer >= 1, got '-2'/],
      [[...generate, '--threads', '-1'], 'generate', /--threads takes an integer from 1 to \d+, got '-1'/],
      [['run', model, '--seed', '-1'], 'run', /--seed takes an integer >= 0, got '-1'/],
      [['demo', '--steps', '-4'], 'demo', /--steps takes an integer from 1 to \d+, got '-4'/],
      [['demo', '--threads', '-1'], 'demo', /--threads takes an integer >= 1, got '-1'/],
      [['bench', '--threads', '-1,2'], 'bench', /--threads takes distinct integers >= 1 separated by commas \(like 1,2\), got '-1,2'/],
      [['bench', '--iterations', '-1'], 'bench', /--iterations takes an integer >= 1, got '-1'/],
      [['bench', '--sessions', '-16'], 'bench', /--sessions takes counts from 1 to 256 separated by commas, or 0, got '-16'/],
      [['bench', 'llm', '--decode-steps', '-1'], 'bench llm', /--decode-steps takes an integer >= 1, got '-1'/],
      [['bench', 'zoo', '--warmup', '-1'], 'bench zoo', /--warmup takes an integer >= 0, got '-1'/],
    ];
    for (const [args, command, message] of cases) expectOneLineFailure(runCli(args), command, 'INVALID_INPUT', message);
    // Joined with '=', as parseArgs already took it.
    expectOneLineFailure(runCli([...generate, '--temperature=-1']), 'generate', 'INVALID_INPUT', /--temperature takes a number >= 0/);
  });

  it('bench with a bad argument fails before starting any child', () => {
    expectOneLineFailure(
      runCli(['bench', '--threads', '1,two']),
      'bench',
      'INVALID_INPUT',
      /--threads takes distinct integers >= 1 separated by commas \(like 1,2\), got '1,two'/,
    );
    expectOneLineFailure(runCli(['bench', '--iterations', '0']), 'bench', 'INVALID_INPUT', /--iterations/);
    expectOneLineFailure(
      runCli(['bench', '--sessions', '0,16']),
      'bench',
      'INVALID_INPUT',
      /--sessions takes counts from 1 to 256 separated by commas, or 0, got '0,16'/,
    );
    expectOneLineFailure(runCli(['bench', testdataPath('djl_corrupt.pte')]), 'bench', 'INVALID_PROGRAM', /not an ExecuTorch program/);
  });

  it('generate without a tokenizer, or with a SentencePiece model', () => {
    const model = testdataPath('djl_corrupt.pte');
    expectOneLineFailure(runCli(['generate', model, '--prompt', 'hi']), 'generate', 'INVALID_INPUT', /--tokenizer FILE is required/);
    const sentencepiece = path.join(dir, 'tokenizer.model');
    fs.writeFileSync(sentencepiece, Uint8Array.of(0x0a, 0x0b, 0x0a, 0x05, 0x3c, 0x75, 0x6e, 0x6b, 0x3e));
    expectOneLineFailure(
      runCli(['generate', model, '--tokenizer', sentencepiece, '--prompt', 'hi']),
      'generate',
      'INVALID_INPUT',
      /SentencePiece/,
    );
    expectOneLineFailure(
      runCli(['generate', model, '--tokenizer', sentencepiece, '--prompt', 'hi', '--temperature', 'hot']),
      'generate',
      'INVALID_INPUT',
      /--temperature takes a number >= 0, got 'hot'/,
    );
  });

  it('import-onnx with a missing model', () => {
    expectOneLineFailure(
      runCli(['import-onnx', path.join(dir, 'absent.onnx'), '-o', path.join(dir, 'out.pte')]),
      'import-onnx',
      'INVALID_INPUT',
      /cannot read ONNX model/,
    );
  });

  it('an unexpected error is INTERNAL, still one line', () => {
    const out = path.join(dir, 'no-such-dir', 'gru.pte');
    expectOneLineFailure(runCli(['export-example', 'gru-stream', out]), 'export-example', 'INTERNAL', /ENOENT.*no-such-dir/);
  });

  it('with --json the failure is one JSON object on stdout', () => {
    const result = runCli(['inspect', '--json', testdataPath('djl_corrupt.pte')]);
    expect(result.status).toBe(1);
    expect(result.stderr).toBe('');
    expect(result.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(JSON.parse(result.stdout).error.code).toBe('INVALID_PROGRAM');
  });

  it("a bench child's failure comes back with its code, not the child's stack", async () => {
    const missing = path.join(dir, 'missing.pte');
    const error = await runInChild({
      program: missing,
      config: 'etna-shared',
      threads: 1,
      iterations: 1,
      warmup: 0,
      session: 'reference',
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_PROGRAM', message: expect.stringMatching(/missing\.pte etna-shared: cannot open/) });
    expect((error as Error).message).not.toMatch(/\n/);
  });
});
