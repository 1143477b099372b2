// Code written for onnxruntime-node working on etna: `type`/`dims` on
// tensors, `inputNames`/`outputNames`, `run(feeds)` without a method name, and
// etna tensors fed to onnxruntime.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { ProgramBuilder } from '../../lib/export/index.js';
import { Module, Tensor } from '../../lib/index.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { onnxModel } from './onnx-writer.js';
import { rejection } from '../helpers/errors.js';

// z = x + y and w = x * y over float32 [2, 3], as ONNX and as an etna program.
const ADD_MUL = onnxModel({
  nodes: [
    { op: 'Add', inputs: ['x', 'y'], outputs: ['z'] },
    { op: 'Mul', inputs: ['x', 'y'], outputs: ['w'] },
  ],
  inputs: [
    { name: 'x', type: 1, shape: [2, 3] },
    { name: 'y', type: 1, shape: [2, 3] },
  ],
  outputs: [
    { name: 'z', type: 1, shape: [2, 3] },
    { name: 'w', type: 1, shape: [2, 3] },
  ],
});

const x = Tensor.float32([2, 3], [1, -2, 3.5, 1e-3, Number.POSITIVE_INFINITY, -0]);
const y = Tensor.float32([2, 3], [0.5, 4, -1, 2, 1, 3]);

describe('onnxruntime habits on an etna module', () => {
  it('inputNames and outputNames are those of the ONNX session', async () => {
    const session = await ort.InferenceSession.create(ADD_MUL);
    const module = await Module.load(importOnnx(ADD_MUL).bytes);
    expect(module.inputNames).toEqual(session.inputNames);
    expect(module.outputNames).toEqual(session.outputNames);
    expect(module.inputNamesOf('forward')).toEqual(['x', 'y']);
    expect(module.outputNamesOf('forward')).toEqual(['z', 'w']);
    await module.dispose();
    await session.release();
  });

  it('run(feeds) without a method name runs forward, and gives what onnxruntime gives', async () => {
    const session = await ort.InferenceSession.create(ADD_MUL);
    const module = await Module.load(importOnnx(ADD_MUL).bytes);
    const ours = await module.run({ x, y });
    const theirs = await session.run({ x: new ort.Tensor(x.type, x.data, x.dims), y: new ort.Tensor(y.type, y.data, y.dims) });
    for (const name of session.outputNames) {
      const value = ours[name] as Tensor;
      expect(value.type).toBe(theirs[name]!.type);
      expect(value.dims).toEqual(theirs[name]!.dims);
      expect(Array.from(value.data as Float32Array)).toEqual(Array.from(theirs[name]!.data as Float32Array));
    }
    // With options too, in onnxruntime's (feeds, options) order.
    const z = new Float32Array(6);
    await module.run({ x, y }, { outputs: { z } });
    expect(Array.from(z)).toEqual(Array.from((ours.z as Tensor).data as Float32Array));
    await module.dispose();
    await session.release();
  });

  it('run(feeds) refuses, naming the methods, when the program has no forward', async () => {
    const program = new ProgramBuilder();
    program.method('encode', (m) => m.output({ code: m.mul(m.input('x', 'float32', [2]), 2) }));
    program.method('decode', (m) => m.output({ x: m.mul(m.input('code', 'float32', [2]), 0.5) }));
    const module = await Module.load(program.toPte());
    const error = await rejection(module.run({ x: Tensor.float32([2], [1, 2]) }));
    expect(error.code).toBe('METHOD_NOT_FOUND');
    expect(error.message).toMatch(/no '.*forward'.*\(methods: 'encode', 'decode'\); pass one, as in run\('encode', feeds\)/);
    expect(error.message).not.toContain('[object Object]');
    expect(() => module.inputNames).toThrow(/methods: 'encode', 'decode'/);
    expect(module.inputNamesOf('decode')).toEqual(['code']);
    expect(module.outputNamesOf('encode')).toEqual(['code']);
    expect(((await module.run('encode', { x: Tensor.float32([2], [1, 2]) })).code as Tensor).toArray()).toEqual([2, 4]);
    await module.dispose();
  });
});

describe('etna tensors in onnxruntime', () => {
  it('new ort.Tensor(t.type, t.data, t.dims) and the etna tensor itself both work as feeds', async () => {
    const session = await ort.InferenceSession.create(ADD_MUL);
    const module = await Module.load(importOnnx(ADD_MUL).bytes);
    // Outputs of one runtime feed the other.
    const { z } = (await module.run({ x, y })) as { z: Tensor };
    const rebuilt = await session.run({ x: new ort.Tensor(z.type, z.data, z.dims), y: new ort.Tensor(y.type, y.data, y.dims) });
    const direct = await session.run({ x: z as unknown as ort.Tensor, y: y as unknown as ort.Tensor });
    const expected = Array.from(z.data as Float32Array, (v, i) => Math.fround(v + (y.data[i] as number)));
    expect(Array.from(rebuilt.z!.data as Float32Array)).toEqual(expected);
    expect(Array.from(direct.z!.data as Float32Array)).toEqual(expected);
    await module.dispose();
    await session.release();
  });

  it('int64 and bool tensors keep their data arrays across (BigInt64Array, Uint8Array)', () => {
    const ids = Tensor.from('int64', [2], ['9007199254740993', -1]);
    const converted = new ort.Tensor(ids.type, ids.data, ids.dims);
    expect(converted.data).toBe(ids.data);
    expect(converted.dims).toEqual([2]);
    const mask = Tensor.from('bool', [1, 2], [true, false]);
    const maskOrt = new ort.Tensor(mask.type, mask.data, mask.dims);
    expect(maskOrt.type).toBe('bool');
    expect(Array.from(maskOrt.data as Uint8Array)).toEqual([1, 0]);
  });
});
