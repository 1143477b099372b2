// `etna run`: one method or a sequence of calls on one module, as JSON.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ProgramBuilder } from '../../lib/export/index.js';
import { Module, Tensor } from '../../lib/index.js';
import { formatOutput, summarizeTensor } from '../../lib/cli/format.js';
import { valueToJson } from '../../lib/cli/values-json.js';
import { runCli } from '../helpers/cli.js';
import { testdataPath } from '../helpers/testdata.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-run-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function writeJson(name: string, value: unknown): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, JSON.stringify(value));
  return file;
}

function stateProgram(): string {
  const builder = new ProgramBuilder();
  const state = builder.sharedBuffer('state', 'float32', [4]);
  builder.method('write', (m) => m.copyInto(state, m.input('x', 'float32', [4])));
  builder.method('read', (m) => m.output(m.add(state, 0)));
  const file = path.join(dir, 'state.pte');
  fs.writeFileSync(file, builder.toPte());
  return file;
}

const calls = [
  { method: 'write', inputs: [{ dtype: 'float32', shape: [4], data: [1, 2, 3, 4] }] },
  { method: 'read', inputs: [] },
];

describe('etna run', () => {
  it('carries state across calls on one module and reports memory', () => {
    const result = runCli(['run', stateProgram(), '--calls', writeJson('calls.json', calls), '--json', '--report']);
    expect(result.status, result.stderr).toBe(0);
    const out = JSON.parse(result.stdout);
    expect(out.calls).toEqual([
      { method: 'write', outputs: [] },
      { method: 'read', outputs: [{ dtype: 'float32', shape: [4], data: [1, 2, 3, 4] }] },
    ]);
    expect(out.memory.mode).toBe('shared');
  });

  it('--report says which arena is borrowed per call and what the module owns apart from the program', () => {
    const shared = runCli(['run', stateProgram(), '--calls', writeJson('calls-report.json', calls), '--report']);
    expect(shared.status, shared.stderr).toBe(0);
    expect(shared.stdout).toMatch(/mem_id 1\s+16 B\s+borrowed per call from the program/);
    expect(shared.stdout).toContain(
      'owned by this module 16 B; held by the program for all its modules 16 B (pooled arena 16 B, pooled workspace 0 B)',
    );
    const unshared = runCli(['run', stateProgram(), '--calls', writeJson('calls-report2.json', calls), '--report', '--share', 'false']);
    expect(unshared.status, unshared.stderr).toBe(0);
    expect(unshared.stdout).not.toContain('borrowed per call');
    expect(unshared.stdout).toMatch(/held by the program for all its modules 0 B \(pooled arena 0 B/);
  });

  it('loses the state with --share false', () => {
    const result = runCli(['run', stateProgram(), '--calls', writeJson('calls2.json', calls), '--json', '--share', 'false']);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).calls[1].outputs[0].data).toEqual([0, 0, 0, 0]);
  });

  it('runs one method with inputs from a file, int64 as strings or numbers', () => {
    const inputs = writeJson('in.json', [
      { dtype: 'int64', shape: [1], data: ['4000000000'] },
      { dtype: 'float32', shape: [1], data: [1.5] },
    ]);
    const result = runCli(['run', testdataPath('npr_dtypes.pte'), '--inputs', inputs, '--json']);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      calls: [
        {
          method: 'forward',
          outputs: [
            { dtype: 'int64', shape: [1], data: [8000000000] },
            { dtype: 'float32', shape: [1], data: [3] },
          ],
        },
      ],
    });
  });

  it('refuses a token past int64 instead of running it wrapped, naming the input and element', () => {
    // Written into a BigInt64Array as it is, 18446744073709551617 (2^64 + 1) would run as token 1.
    for (const token of ['"18446744073709551617"', '18446744073709551617']) {
      const file = path.join(dir, 'wrapped.json');
      fs.writeFileSync(file, `[{"dtype": "int64", "shape": [1], "data": [${token}]}, {"dtype": "float32", "shape": [1], "data": [1.5]}]`);
      const result = runCli(['run', testdataPath('npr_dtypes.pte'), '--inputs', file, '--json']);
      expect(result.status, token).toBe(1);
      const { error } = JSON.parse(result.stdout);
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(
        /^inputs\[0\]\.data\[0\] = (number 18446744073709552000|'18446744073709551617') is outside the int64 range/,
      );
    }
    const narrow = writeJson('fraction.json', [
      { dtype: 'int64', shape: [1], data: [2.5] },
      { dtype: 'float32', shape: [1], data: ['NaN'] },
    ]);
    const fraction = runCli(['run', testdataPath('npr_dtypes.pte'), '--inputs', narrow, '--json']);
    expect(fraction.status).toBe(1);
    expect(JSON.parse(fraction.stdout).error).toEqual({
      code: 'INVALID_INPUT',
      message: 'inputs[0].data[0] = number 2.5 is not an integer',
    });
  });

  it('generates inputs from the metadata', () => {
    const result = runCli(['run', testdataPath('et_add.pte'), '--fill', 'ones', '--json']);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).calls[0].outputs[0].data).toEqual([2]);
  });

  it('prints errors as JSON and exits 1', () => {
    const inputs = writeJson('bad.json', [{ dtype: 'float32', shape: [2], data: [1, 2] }]);
    const result = runCli(['run', testdataPath('et_add.pte'), '--inputs', inputs, '--json']);
    expect(result.status).toBe(1);
    expect(JSON.parse(result.stdout).error).toEqual({ code: 'INVALID_INPUT', message: "method 'forward' takes 2 inputs, got 1" });
    const missing = runCli(['run', testdataPath('et_add.pte'), '--method', 'nope', '--json']);
    expect(JSON.parse(missing.stdout).error.code).toBe('METHOD_NOT_FOUND');
  });

  it('passes --external-data to the module: the xor training step runs with its .ptd', async () => {
    const x = { dtype: 'float32', shape: [1, 2], data: [1, 0] };
    const label = { dtype: 'int64', shape: [1], data: [1] };
    const inputs = writeJson('xor.json', [x, label]);
    const program = testdataPath('et_xor_training.pte');
    const externalData = testdataPath('et_xor_training.ptd');
    const result = runCli(['run', program, '--external-data', externalData, '--inputs', inputs, '--json']);
    expect(result.status, result.stderr).toBe(0);
    const module = await Module.load(program, { externalData });
    const want = await module.execute('forward', [Tensor.float32([1, 2], [1, 0]), Tensor.int64([1], [1])]);
    await module.dispose();
    expect(JSON.parse(result.stdout).calls[0].outputs).toEqual(want.map(valueToJson));
    // Without the file the parameters are missing.
    const without = runCli(['run', program, '--inputs', inputs]);
    expect(without.status).toBe(1);
    expect(without.stderr).toMatch(/^etna run: INVALID_PROGRAM: .*external data \('net\.linear\.weight'\)/);
  });

  it('summarizes long tensors by default and prints them whole with --full; --json is always whole', () => {
    const builder = new ProgramBuilder();
    builder.method('forward', (m) => {
      const x = m.input('x', 'float32', [40]);
      m.output(m.add(x, 0));
      m.output(m.add(m.input('y', 'float32', [3]), 0));
    });
    const file = path.join(dir, 'long.pte');
    fs.writeFileSync(file, builder.toPte());
    const values = Array.from({ length: 40 }, (_, i) => i - 10);
    const inputs = writeJson('long.json', [
      { dtype: 'float32', shape: [40], data: values },
      { dtype: 'float32', shape: [3], data: [7, 8, 9] },
    ]);
    const summary = runCli(['run', file, '--inputs', inputs]);
    expect(summary.status, summary.stderr).toBe(0);
    expect(summary.stdout.split('\n').slice(1, 3)).toEqual([
      '  output 0: float32[40] 40 values [-10, -9, -8, ..., 27, 28, 29] min -10 max 29 mean 9.5',
      '  output 1: {"dtype":"float32","shape":[3],"data":[7,8,9]}',
    ]);
    const full = runCli(['run', file, '--inputs', inputs, '--full']);
    expect(full.stdout).toContain(`  output 0: ${JSON.stringify({ dtype: 'float32', shape: [40], data: values })}`);
    const json = runCli(['run', file, '--inputs', inputs, '--json']);
    expect(JSON.parse(json.stdout).calls[0].outputs[0].data).toEqual(values);
  });

  it('summaries count NaNs apart, count true elements of bools, and show int64 exactly', () => {
    const floats = Tensor.float32(
      [20],
      Array.from({ length: 20 }, (_, i) => (i % 5 === 0 ? NaN : i)),
    );
    expect(summarizeTensor(floats)).toBe('float32[20] 20 values [NaN, 1, 2, ..., 17, 18, 19] min 1 max 19 mean 10 (4 NaN)');
    expect(summarizeTensor(Tensor.float32([17], new Array(17).fill(NaN)))).toMatch(/ all NaN$/);
    const bools = new Tensor(
      'bool',
      [4, 5],
      Uint8Array.from({ length: 20 }, (_, i) => (i < 3 ? 1 : 0)),
    );
    expect(summarizeTensor(bools)).toBe('bool[4x5] 20 values [true, true, true, ..., false, false, false] true 3 of 20');
    const big = Tensor.int64(
      [17],
      Array.from({ length: 17 }, (_, i) => 9007199254740993n + BigInt(i)),
    );
    expect(summarizeTensor(big)).toMatch(
      /^int64\[17\] 17 values \[9007199254740993, 9007199254740994, 9007199254740995, \.\.\., 9007199254741007, 9007199254741008, 9007199254741009\] min /,
    );
    // 16 elements or fewer, and primitives, print whole.
    expect(formatOutput(Tensor.float32([16], new Array(16).fill(1)), false)).toBe(
      JSON.stringify({ dtype: 'float32', shape: [16], data: new Array(16).fill(1) }),
    );
    expect(formatOutput(7n, false)).toBe('7');
  });
});
