// An input dim given as a range (`--shape x=1x3x8x16..64`): one program planned
// at the upper bound runs every width in the range, portable and on XNNPACK,
// and matches onnxruntime at each; sizes computed from the width that the
// program cannot follow are refused by node.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { EtnaError, Module, Program, Tensor } from '../../lib/index.js';
import { importOnnx, type InputShape } from '../../lib/onnx/index.js';
import { writeOnnxModel, type OnnxGraphInitializer, type OnnxGraphNode } from '../../lib/tools/onnx-emitter/graph-writer.js';
import { seededUniform } from '../../lib/tools/onnx-emitter/paddle-style.js';
import { relativeDifference } from '../../lib/tools/bench/onnx-graphs.js';
import { runCli } from '../helpers/cli.js';

const HEIGHT = 8;
const RANGE = { min: 16, max: 64 };

function weights(random: (lo: number, hi: number) => number, name: string, dims: number[]): OnnxGraphInitializer {
  const size = dims.reduce((a, b) => a * b, 1);
  return { name, dims, float32: Float32Array.from({ length: size }, () => random(-0.5, 0.5)) };
}

/**
 * A text-line recogniser in miniature, with a symbolic input width: conv stem,
 * AveragePool and MaxPool, a Resize by scales, squeeze-and-excitation
 * (GlobalAveragePool), a Reshape whose target is computed from Shape (H*W),
 * Transpose, Squeeze/Unsqueeze, q/k/v sliced from one MatMul, two-head
 * attention (MatMul, Softmax over the varying length), a mean over channels,
 * and a Softmax classifier.
 */
function recogniserModel(): Uint8Array {
  const random = seededUniform(11);
  const initializers: OnnxGraphInitializer[] = [
    weights(random, 'conv_w', [8, 3, 3, 3]),
    weights(random, 'conv_b', [8]),
    weights(random, 'down_w', [8, 8, 1, 2]),
    weights(random, 'se_w', [8, 8, 1, 1]),
    weights(random, 'wqkv', [8, 12]),
    weights(random, 'cls_w', [4, 5]),
    weights(random, 'cls_b', [5]),
    { name: 'i0', dims: [1], int64: [0] },
    { name: 'i1', dims: [1], int64: [1] },
    { name: 'i2', dims: [1], int64: [2] },
    { name: 'i3', dims: [1], int64: [3] },
    { name: 'axes1', dims: [1], int64: [1] },
    { name: 'axes2', dims: [1], int64: [2] },
    { name: 'at0', dims: [1], int64: [0] },
    { name: 'at4', dims: [1], int64: [4] },
    { name: 'at8', dims: [1], int64: [8] },
    { name: 'at12', dims: [1], int64: [12] },
    { name: 'heads', dims: [4], int64: [0, 0, 2, 2] },
    { name: 'merged', dims: [3], int64: [0, 0, 4] },
    { name: 'twice_wide', dims: [4], float32: Float32Array.from([1, 1, 1, 2]) },
  ];
  const slice = (from: string, to: string, out: string): OnnxGraphNode => ({
    op: 'Slice',
    inputs: ['qkv', from, to, 'axes2'],
    outputs: [out],
  });
  const nodes: OnnxGraphNode[] = [
    {
      op: 'Conv',
      inputs: ['x', 'conv_w', 'conv_b'],
      outputs: ['c1'],
      attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } },
    },
    { op: 'Relu', inputs: ['c1'], outputs: ['r1'] },
    { op: 'AveragePool', inputs: ['r1'], outputs: ['a1'], attributes: { kernel_shape: { ints: [2, 2] }, strides: { ints: [2, 2] } } },
    { op: 'MaxPool', inputs: ['a1'], outputs: ['m1'], attributes: { kernel_shape: { ints: [3, 3] }, pads: { ints: [1, 1, 1, 1] } } },
    { op: 'Resize', inputs: ['m1', '', 'twice_wide'], outputs: ['up'], attributes: { mode: { string: 'nearest' } } },
    { op: 'Conv', inputs: ['up', 'down_w'], outputs: ['d1'], attributes: { kernel_shape: { ints: [1, 2] }, strides: { ints: [1, 2] } } },
    { op: 'GlobalAveragePool', inputs: ['d1'], outputs: ['pooled'] },
    { op: 'Conv', inputs: ['pooled', 'se_w'], outputs: ['se'], attributes: { kernel_shape: { ints: [1, 1] } } },
    { op: 'Sigmoid', inputs: ['se'], outputs: ['gate'] },
    { op: 'Mul', inputs: ['d1', 'gate'], outputs: ['feat'] },
    // target = [N, C, H * W] from the runtime shape, as exporters write a flatten of the spatial dims.
    { op: 'Shape', inputs: ['feat'], outputs: ['fs'] },
    { op: 'Gather', inputs: ['fs', 'i0'], outputs: ['n'], attributes: { axis: { int: 0 } } },
    { op: 'Gather', inputs: ['fs', 'i1'], outputs: ['c'], attributes: { axis: { int: 0 } } },
    { op: 'Gather', inputs: ['fs', 'i2'], outputs: ['h'], attributes: { axis: { int: 0 } } },
    { op: 'Gather', inputs: ['fs', 'i3'], outputs: ['w'], attributes: { axis: { int: 0 } } },
    { op: 'Mul', inputs: ['h', 'w'], outputs: ['hw'] },
    { op: 'Concat', inputs: ['n', 'c', 'hw'], outputs: ['target'], attributes: { axis: { int: 0 } } },
    { op: 'Reshape', inputs: ['feat', 'target'], outputs: ['flat'] },
    { op: 'Transpose', inputs: ['flat'], outputs: ['seq'], attributes: { perm: { ints: [0, 2, 1] } } },
    { op: 'Unsqueeze', inputs: ['seq', 'axes1'], outputs: ['seq4'] },
    { op: 'Squeeze', inputs: ['seq4', 'axes1'], outputs: ['tokens'] },
    { op: 'MatMul', inputs: ['tokens', 'wqkv'], outputs: ['qkv'] },
    slice('at0', 'at4', 'q'),
    slice('at4', 'at8', 'k'),
    slice('at8', 'at12', 'v'),
    { op: 'Reshape', inputs: ['q', 'heads'], outputs: ['q4'] },
    { op: 'Reshape', inputs: ['k', 'heads'], outputs: ['k4'] },
    { op: 'Reshape', inputs: ['v', 'heads'], outputs: ['v4'] },
    { op: 'Transpose', inputs: ['q4'], outputs: ['qh'], attributes: { perm: { ints: [0, 2, 1, 3] } } },
    { op: 'Transpose', inputs: ['k4'], outputs: ['kh'], attributes: { perm: { ints: [0, 2, 3, 1] } } },
    { op: 'Transpose', inputs: ['v4'], outputs: ['vh'], attributes: { perm: { ints: [0, 2, 1, 3] } } },
    { op: 'MatMul', inputs: ['qh', 'kh'], outputs: ['scores'] },
    { op: 'Softmax', inputs: ['scores'], outputs: ['attn'], attributes: { axis: { int: -1 } } },
    { op: 'MatMul', inputs: ['attn', 'vh'], outputs: ['mixed4'] },
    { op: 'Transpose', inputs: ['mixed4'], outputs: ['mixedt'], attributes: { perm: { ints: [0, 2, 1, 3] } } },
    { op: 'Reshape', inputs: ['mixedt', 'merged'], outputs: ['mixed'] },
    { op: 'ReduceMean', inputs: ['mixed'], outputs: ['mean'], attributes: { axes: { ints: [-1] }, keepdims: { int: 1 } } },
    { op: 'Sub', inputs: ['mixed', 'mean'], outputs: ['centred'] },
    { op: 'MatMul', inputs: ['centred', 'cls_w'], outputs: ['logits0'] },
    { op: 'Add', inputs: ['logits0', 'cls_b'], outputs: ['logits'] },
    { op: 'Softmax', inputs: ['logits'], outputs: ['prob'], attributes: { axis: { int: -1 } } },
  ];
  // No input shape: the width (and everything else) must be given at import.
  return writeOnnxModel({ nodes, inputs: [{ name: 'x' }], outputs: [{ name: 'prob' }], initializers }, 17);
}

/** A graph that adds a tensor built from its own shape: import-time data at each width, which a bounded program cannot hold. */
function shapeDataModel(): Uint8Array {
  const nodes: OnnxGraphNode[] = [
    { op: 'Shape', inputs: ['x'], outputs: ['s'] },
    { op: 'ConstantOfShape', inputs: ['s'], outputs: ['zeros'] },
    { op: 'Add', inputs: ['x', 'zeros'], outputs: ['y'] },
  ];
  return writeOnnxModel({ nodes, inputs: [{ name: 'x' }], outputs: [{ name: 'y' }], initializers: [] }, 17);
}

function inputAt(width: number): { shape: number[]; data: Float32Array } {
  const shape = [1, 3, HEIGHT, width];
  const random = seededUniform(width);
  return { shape, data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => random(-1, 1)) };
}

async function onnxruntimeAt(model: Uint8Array, width: number): Promise<{ shape: number[]; data: Float32Array }> {
  const input = inputAt(width);
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const out = (await session.run({ x: new ort.Tensor('float32', input.data, input.shape) })).prob!;
  await session.release();
  return { shape: [...out.dims], data: out.data as Float32Array };
}

describe('bounded dynamic input shapes', () => {
  const model = recogniserModel();
  const widths = [RANGE.min, 33, 40, RANGE.max];

  for (const xnnpack of [true, false]) {
    it(`one program runs widths ${widths.join(', ')} and matches onnxruntime at each (${xnnpack ? 'XNNPACK' : 'portable'})`, async () => {
      const imported = importOnnx(model, { shapes: { x: [1, 3, HEIGHT, RANGE] }, xnnpack });
      expect(imported.inputs).toEqual([{ name: 'x', dtype: 'float32', shape: [1, 3, HEIGHT, 64], minShape: [1, 3, HEIGHT, 16] }]);
      // Length = (H/2) * (W/2) tokens.
      expect(imported.outputs).toEqual([{ name: 'prob', dtype: 'float32', shape: [1, 4 * 32, 5], minShape: [1, 4 * 8, 5] }]);
      // The two-head scores [1, 2, L, L] vary in two dims: their reshapes read L from the tensor at run time.
      expect(Program.load(imported.bytes).describe().methods[0]!.operators).toContain('aten::sym_size.int');
      if (xnnpack) expect(imported.calls.delegate).toBeGreaterThanOrEqual(1);
      const module = await Module.load(imported.bytes);
      expect(module.methodMeta('forward').inputs[0]!.dynamism).toBe('bound');
      expect(module.methodMeta('forward').outputs[0]!.dynamism).toBe('bound');
      for (const width of widths) {
        const expected = await onnxruntimeAt(model, width);
        const input = inputAt(width);
        const actual = (await module.run('forward', { x: Tensor.float32(input.shape, input.data) })).prob!;
        expect(actual.shape).toEqual(expected.shape);
        expect(relativeDifference(actual.toArray() as number[], expected.data)).toBeLessThan(1e-4);
      }
      // Past the upper bound the runtime refuses the input.
      const tooWide = inputAt(RANGE.max + 8);
      await expect(module.run('forward', { x: Tensor.float32(tooWide.shape, tooWide.data) })).rejects.toMatchObject({
        code: 'INVALID_INPUT',
      });
      await module.dispose();
    });
  }

  it('slices counted from the end, Flatten and a mean over the varying axis follow the width', async () => {
    // y = [x[..., 1:-1] flattened from axis 1, mean of x[..., -3:] over W, mean over W]: ends and starts at a fixed
    // distance from the varying end become negative indices, and the mean divides by the actual width.
    const nodes: OnnxGraphNode[] = [
      { op: 'Slice', inputs: ['x', 'one', 'minus_one', 'axis3'], outputs: ['inner'] },
      { op: 'Flatten', inputs: ['inner'], outputs: ['flat'], attributes: { axis: { int: 1 } } },
      { op: 'Slice', inputs: ['x', 'minus_three', 'big', 'axis3'], outputs: ['tail'] },
      { op: 'ReduceMean', inputs: ['tail'], outputs: ['tail_mean'], attributes: { axes: { ints: [3] }, keepdims: { int: 0 } } },
      { op: 'ReduceMean', inputs: ['x'], outputs: ['mean'], attributes: { axes: { ints: [3] }, keepdims: { int: 0 } } },
      { op: 'Flatten', inputs: ['tail_mean'], outputs: ['tail_flat'], attributes: { axis: { int: 1 } } },
      { op: 'Flatten', inputs: ['mean'], outputs: ['mean_flat'], attributes: { axis: { int: 1 } } },
      { op: 'Concat', inputs: ['flat', 'tail_flat', 'mean_flat'], outputs: ['prob'], attributes: { axis: { int: 1 } } },
    ];
    const initializers: OnnxGraphInitializer[] = [
      { name: 'one', dims: [1], int64: [1] },
      { name: 'minus_one', dims: [1], int64: [-1] },
      { name: 'minus_three', dims: [1], int64: [-3] },
      { name: 'big', dims: [1], int64: [1 << 30] },
      { name: 'axis3', dims: [1], int64: [3] },
    ];
    const sliced = writeOnnxModel({ nodes, inputs: [{ name: 'x' }], outputs: [{ name: 'prob' }], initializers }, 17);
    for (const xnnpack of [true, false]) {
      const imported = importOnnx(sliced, { shapes: { x: [1, 3, HEIGHT, RANGE] }, xnnpack });
      const module = await Module.load(imported.bytes);
      for (const width of [RANGE.min, 29, RANGE.max]) {
        const expected = await onnxruntimeAt(sliced, width);
        const input = inputAt(width);
        const actual = (await module.run('forward', { x: Tensor.float32(input.shape, input.data) })).prob!;
        expect(actual.shape).toEqual(expected.shape);
        expect(relativeDifference(actual.toArray() as number[], expected.data)).toBeLessThan(1e-5);
      }
      await module.dispose();
    }
  });

  it('an opset-11 Softmax over the last dim runs on the tensor as it is, with height and width both ranged', async () => {
    // Viewed as a matrix [3 * H, W], both dims would vary: the view would leave the delegate.
    const softmax = writeOnnxModel(
      {
        nodes: [{ op: 'Softmax', inputs: ['x'], outputs: ['prob'], attributes: { axis: { int: 3 } } }],
        inputs: [{ name: 'x' }],
        outputs: [{ name: 'prob' }],
        initializers: [],
      },
      11,
    );
    const imported = importOnnx(softmax, { shapes: { x: '1x3x4..8x16..64' } });
    expect(imported.inputs[0]!.minShape).toEqual([1, 3, 4, 16]);
    expect(imported.calls).toEqual({ delegate: 1, kernel: 0 });
    const module = await Module.load(imported.bytes);
    const session = await ort.InferenceSession.create(softmax, { intraOpNumThreads: 1 });
    for (const [height, width] of [
      [4, 16],
      [5, 37],
      [8, 64],
    ] as const) {
      const shape = [1, 3, height, width];
      const random = seededUniform(height * width);
      const data = Float32Array.from({ length: 3 * height * width }, () => random(-3, 3));
      const expected = (await session.run({ x: new ort.Tensor('float32', data, shape) })).prob!;
      const actual = (await module.run('forward', { x: Tensor.float32(shape, data) })).prob!;
      expect(actual.shape).toEqual(shape);
      expect(relativeDifference(actual.toArray() as number[], expected.data as Float32Array)).toBeLessThan(1e-5);
    }
    await session.release();
    await module.dispose();
  });

  it('the text form and the object form import the same program', () => {
    const fromText = importOnnx(model, { shapes: { x: `1x3x${HEIGHT}x16..64` } });
    const fromObject = importOnnx(model, { shapes: { x: [1, 3, HEIGHT, { min: 16, max: 64 }] } });
    expect(Buffer.from(fromText.bytes).equals(Buffer.from(fromObject.bytes))).toBe(true);
  });

  it('a range with min == max is a fixed size', async () => {
    const imported = importOnnx(model, { shapes: { x: [1, 3, HEIGHT, { min: 24, max: 24 }] } });
    expect(imported.inputs[0]!.minShape).toBeUndefined();
    const module = await Module.load(imported.bytes);
    expect(module.methodMeta('forward').inputs[0]!.dynamism).toBe('static');
    await module.dispose();
  });

  const badShapes: [InputShape, RegExp][] = [
    [`1x3x${HEIGHT}x64..16`, /input 'x': dim 3 range 64\.\.16 has min > max/],
    [`1x3x${HEIGHT}x0..64`, /input 'x': dim 3 min 0 is not an integer >= 1/],
    [`1x3x${HEIGHT}x1.5..64`, /input 'x': dim 3 min '1\.5'/],
    [`1x3x${HEIGHT}x16..`, /input 'x': dim 3 max ''/],
    [[1, 3, HEIGHT, { min: 16, max: 64.5 }], /input 'x': dim 3 max 64\.5 is not an integer/],
    [[1, 3, HEIGHT, { min: -2, max: 8 }], /input 'x': dim 3 min -2/],
  ];
  for (const [shape, message] of badShapes) {
    it(`refuses the range ${JSON.stringify(shape)}`, () => {
      let error: unknown;
      try {
        importOnnx(model, { shapes: { x: shape } });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(EtnaError);
      expect((error as EtnaError).code).toBe('INVALID_INPUT');
      expect((error as EtnaError).message).toMatch(message);
    });
  }

  it('refuses a range on a state input', () => {
    expect(() => importOnnx(shapeDataModel(), { shapes: { x: '1x3x8x16..64' }, state: [{ input: 'x', output: 'y' }] })).toThrow(
      /input 'x': a state or context input cannot have a size range/,
    );
  });

  it('refuses a graph that turns the width into data, naming the node', () => {
    expect(() => importOnnx(shapeDataModel(), { shapes: { x: '1x3x8x16..64' } })).toThrow(
      /node 'Add_2' \(Add\).*import-time data computed from the input size/,
    );
    // At one fixed width the same graph imports.
    expect(importOnnx(shapeDataModel(), { shapes: { x: '1x3x8x16' } }).outputs[0]!.shape).toEqual([1, 3, 8, 16]);
  });

  it('etna import-onnx --shape takes a range and prints it', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-bounded-'));
    try {
      const onnxPath = path.join(dir, 'rec.onnx');
      const ptePath = path.join(dir, 'rec.pte');
      fs.writeFileSync(onnxPath, model);
      const result = runCli(['import-onnx', onnxPath, '-o', ptePath, '--shape', `x=1x3x${HEIGHT}x16..64`]);
      expect(result.status, result.stderr).toBe(0);
      expect(result.stdout).toContain(`forward(x float32[1,3,${HEIGHT},16..64]) -> prob float32[1,32..128,5]`);
      const bad = runCli(['import-onnx', onnxPath, '-o', ptePath, '--shape', `x=1x3x${HEIGHT}x64..16`]);
      expect(bad.status).not.toBe(0);
      expect(bad.stderr).toMatch(/min > max/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
