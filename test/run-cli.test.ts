// `etna run`: one method or a sequence of calls on one module, as JSON.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { ProgramBuilder } from '../lib/export/index.js';
import { runCli } from './helpers/cli.js';
import { haveTestdata, testdataPath } from './helpers/testdata.js';

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

  it('loses the state with --share false', () => {
    const result = runCli(['run', stateProgram(), '--calls', writeJson('calls2.json', calls), '--json', '--share', 'false']);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).calls[1].outputs[0].data).toEqual([0, 0, 0, 0]);
  });

  it.runIf(haveTestdata)('runs one method with inputs from a file, int64 as strings or numbers', () => {
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

  it.runIf(haveTestdata)('generates inputs from the metadata', () => {
    const result = runCli(['run', testdataPath('et_add.pte'), '--fill', 'ones', '--json']);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).calls[0].outputs[0].data).toEqual([2]);
  });

  it.runIf(haveTestdata)('prints errors as JSON and exits 1', () => {
    const inputs = writeJson('bad.json', [{ dtype: 'float32', shape: [2], data: [1, 2] }]);
    const result = runCli(['run', testdataPath('et_add.pte'), '--inputs', inputs, '--json']);
    expect(result.status).toBe(1);
    expect(JSON.parse(result.stdout).error).toEqual({ code: 'INVALID_INPUT', message: "method 'forward' takes 2 inputs, got 1" });
    const missing = runCli(['run', testdataPath('et_add.pte'), '--method', 'nope', '--json']);
    expect(JSON.parse(missing.stdout).error.code).toBe('METHOD_NOT_FOUND');
  });
});
