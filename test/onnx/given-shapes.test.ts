// Input shapes given at import (`shapes`, `--shape`) that contradict the model
// are refused when importing, naming the input and the node or dim that
// disagrees, instead of writing a program that fails when it loads or runs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { EtnaError, Module, Tensor } from '../../lib/index.js';
import { boundConstant, importOnnx, type ImportOnnxOptions } from '../../lib/onnx/index.js';
import { runCli } from '../helpers/cli.js';
import { onnxModel, type TestGraph } from './onnx-writer.js';

const f32 = (name: string, shape: (number | string)[]) => ({ name, type: 1, shape });
const ramp = (count: number): number[] => Array.from({ length: count }, (_, i) => (i % 7) - 3);

// y = x @ w with w [4, 8]: x must end in 4.
const MATMUL: TestGraph = {
  nodes: [{ op: 'MatMul', inputs: ['x', 'w'], outputs: ['y'], name: 'project' }],
  inputs: [f32('x', ['batch', 'features'])],
  outputs: [f32('y', ['batch', 8])],
  initializers: [{ name: 'w', dims: [4, 8], floats: ramp(32) }],
};

function refusal(model: Uint8Array, options: ImportOnnxOptions): EtnaError {
  try {
    importOnnx(model, options);
  } catch (error) {
    expect(error).toBeInstanceOf(EtnaError);
    return error as EtnaError;
  }
  throw new Error('the import was expected to fail');
}

describe('shapes that contradict an operator are refused at import', () => {
  for (const xnnpack of [true, false]) {
    it(`MatMul with x=1x5 against a [4, 8] weight (${xnnpack ? 'XNNPACK' : 'portable'}) names the node and the input`, () => {
      const error = refusal(onnxModel(MATMUL), { shapes: { x: [1, 5] }, xnnpack });
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/^node 'project' \(MatMul\): .*\[1, 5\] x \[4, 8\]/);
      expect(error.message).toMatch(/input shapes given at import: x=1x5/);
    });
  }

  it('a batched MatMul whose inner dims differ', () => {
    const batched = onnxModel({ ...MATMUL, inputs: [f32('x', ['batch', 'rows', 'features'])], outputs: [f32('y', ['batch', 'rows', 8])] });
    const error = refusal(batched, { shapes: { x: [2, 3, 5] }, xnnpack: false });
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toMatch(/^node 'project' \(MatMul\): .*\[6, 5\] x \[4, 8\].*x=2x3x5/);
  });

  it('the shape that agrees imports and runs', async () => {
    const imported = importOnnx(onnxModel(MATMUL), { shapes: { x: [2, 4] } });
    expect(imported.outputs).toEqual([{ name: 'y', dtype: 'float32', shape: [2, 8] }]);
    const module = await Module.load(imported.bytes);
    const [y] = await module.execute('forward', [Tensor.float32([2, 4], [1, 0, 0, 0, 0, 0, 0, 1])]);
    expect((y as Tensor).toArray()).toEqual([...ramp(32).slice(0, 8), ...ramp(32).slice(24, 32)]);
    module.dispose();
  });

  it('Conv whose input channels disagree with the weight', () => {
    const model = onnxModel({
      nodes: [{ op: 'Conv', inputs: ['x', 'w'], outputs: ['y'], name: 'stem', ints: { kernel_shape: [3, 3] } }],
      inputs: [f32('x', [1, 'channels', 8, 8])],
      outputs: [f32('y', [1, 4, 6, 6])],
      initializers: [{ name: 'w', dims: [4, 3, 3, 3], floats: ramp(108) }],
    });
    for (const xnnpack of [true, false]) {
      const error = refusal(model, { shapes: { x: [1, 5, 8, 8] }, xnnpack });
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(/^node 'stem' \(Conv\): .*5 channels.*expects 3.*x=1x5x8x8/);
    }
  });

  it('Concat whose other dims disagree', () => {
    const model = onnxModel({
      nodes: [{ op: 'Concat', inputs: ['x', 'c'], outputs: ['y'], name: 'join', int: { axis: 0 } }],
      inputs: [f32('x', ['rows', 'cols'])],
      outputs: [f32('y', ['total', 3])],
      initializers: [{ name: 'c', dims: [2, 3], floats: ramp(6) }],
    });
    const error = refusal(model, { shapes: { x: [1, 4] } });
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toMatch(/^node 'join' \(Concat\): .*\[2, 3\].*x=1x4/);
  });

  it('Reshape to a fixed size with another element count', () => {
    // The target comes from an int64 input bound at import, as a constant would.
    const shaped = onnxModel({
      nodes: [{ op: 'Reshape', inputs: ['x', 'target'], outputs: ['y'], name: 'flatten' }],
      inputs: [f32('x', ['n', 'm']), { name: 'target', type: 7, shape: [2] }],
      outputs: [f32('y', [4, 8])],
    });
    const error = refusal(shaped, { shapes: { x: [1, 5] }, bind: { target: boundConstant('int64', [2], BigInt64Array.of(4n, 8n)) } });
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toMatch(/^node 'flatten' \(Reshape\): Reshape: cannot view \[1, 5\] \(5 elements\) as \[4, 8\].*x=1x5/);
  });

  it('Add whose operands do not broadcast is INVALID_INPUT', () => {
    const model = onnxModel({
      nodes: [{ op: 'Add', inputs: ['x', 'b'], outputs: ['y'], name: 'bias' }],
      inputs: [f32('x', ['n', 'k'])],
      outputs: [f32('y', ['n', 4])],
      initializers: [{ name: 'b', dims: [4], floats: ramp(4) }],
    });
    const error = refusal(model, { shapes: { x: [2, 3] } });
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toMatch(/^node 'bias' \(Add\): shapes \[2,3\] and \[4\] do not broadcast.*x=2x3/);
  });
});

describe('a given shape may set symbolic dims but not change fixed ones', () => {
  const model = onnxModel({
    nodes: [{ op: 'Relu', inputs: ['x'], outputs: ['y'] }],
    inputs: [f32('x', ['batch', 4])],
    outputs: [f32('y', ['batch', 4])],
  });

  it('a fixed dim set to another size is refused naming the input, the dim and the model value', () => {
    const error = refusal(model, { shapes: { x: [2, 5] } });
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toBe(
      "shape of input 'x': dim 1 is fixed at 4 by the model [batch, 4], the given shape sets it to 5; only symbolic dims can be set",
    );
  });

  it('a range over a fixed dim is refused too', () => {
    expect(refusal(model, { shapes: { x: '2x4..8' } }).message).toMatch(/input 'x': dim 1 is fixed at 4 .* sets it to 8/);
  });

  it('another rank is refused', () => {
    const error = refusal(model, { shapes: { x: [2, 4, 1] } });
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toMatch(/input 'x': the model declares rank 2 \[batch, 4\], the given shape 2x4x1 has rank 3/);
  });

  it('the symbolic dim is set, and the output shape follows it', async () => {
    const imported = importOnnx(model, { shapes: { x: [3, 4] } });
    expect(imported.outputs).toEqual([{ name: 'y', dtype: 'float32', shape: [3, 4] }]);
    const module = await Module.load(imported.bytes);
    const [y] = await module.execute('forward', [Tensor.float32([3, 4], ramp(12))]);
    expect((y as Tensor).toArray()).toEqual(ramp(12).map((v) => Math.max(v, 0)));
    module.dispose();
  });
});

describe('etna import-onnx --shape', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-given-shapes-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('refuses a shape that contradicts a node, in one line, writing no program', () => {
    const model = path.join(dir, 'matmul.onnx');
    const out = path.join(dir, 'matmul.pte');
    fs.writeFileSync(model, onnxModel(MATMUL));
    const result = runCli(['import-onnx', model, '--shape', 'x=1x5', '-o', out]);
    expect(result.status, result.stderr).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(/^etna import-onnx: INVALID_INPUT: node 'project' \(MatMul\): .*x=1x5/);
    expect(fs.existsSync(out)).toBe(false);
  });

  it('refuses a shape that changes a fixed dim', () => {
    const model = path.join(dir, 'fixed.onnx');
    fs.writeFileSync(model, onnxModel({ ...MATMUL, inputs: [f32('x', ['batch', 4])] }));
    const result = runCli(['import-onnx', model, '--shape', 'x=1x5', '-o', path.join(dir, 'fixed.pte')]);
    expect(result.status, result.stderr).toBe(1);
    expect(result.stderr).toMatch(/^etna import-onnx: INVALID_INPUT: shape of input 'x': dim 1 is fixed at 4 by the model/);
  });
});
