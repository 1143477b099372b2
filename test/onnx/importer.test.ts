// importOnnx on small models written here: state pairs in shared buffers,
// reset and get_state, folding, and the errors for what cannot be imported.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { EtnaError, Module, Tensor } from '../../lib/index.js';
import { importOnnx } from '../../lib/onnx/index.js';
import { runCli } from '../helpers/cli.js';
import { onnxModel, type TestGraph } from './onnx-writer.js';

const f32 = (name: string, shape: number[]) => ({ name, type: 1, shape });

// total' = total + x * 2; output = total'
const ACCUMULATOR: TestGraph = {
  nodes: [
    { op: 'Add', inputs: ['x', 'x'], outputs: ['twice'] },
    { op: 'Add', inputs: ['total', 'twice'], outputs: ['total_next'] },
    { op: 'Relu', inputs: ['total_next'], outputs: ['y'] },
  ],
  inputs: [f32('x', [1, 4]), f32('total', [1, 4])],
  outputs: [f32('y', [1, 4]), f32('total_next', [1, 4])],
};

async function values(module: Module, method: string, inputs: Tensor[] = []): Promise<number[][]> {
  return (await module.execute(method, inputs)).map((v) => (v as Tensor).toArray());
}

describe('importOnnx', () => {
  it('keeps a state pair in a shared buffer that step updates and reset zeroes', async () => {
    const imported = importOnnx(onnxModel(ACCUMULATOR), { state: [{ input: 'total', output: 'total_next' }], method: 'step' });
    expect(imported.methods).toEqual(['step', 'reset', 'get_state']);
    expect(imported.inputs).toEqual([{ name: 'x', dtype: 'float32', shape: [1, 4] }]);
    expect(imported.outputs.map((o) => o.name)).toEqual(['y']);
    const module = await Module.load(imported.bytes, { shareMemoryArenas: true });
    const x = Tensor.float32([1, 4], [1, 2, 3, 4]);
    expect(await values(module, 'step', [x])).toEqual([[2, 4, 6, 8]]);
    expect(await values(module, 'step', [x])).toEqual([[4, 8, 12, 16]]);
    expect(await values(module, 'get_state')).toEqual([[4, 8, 12, 16]]);
    await module.execute('reset', []);
    expect(await values(module, 'get_state')).toEqual([[0, 0, 0, 0]]);
    expect(await values(module, 'step', [x])).toEqual([[2, 4, 6, 8]]);
    await module.dispose();
  });

  it('keeps a context window of an input between calls', async () => {
    const model = onnxModel({
      nodes: [{ op: 'Identity', inputs: ['signal'], outputs: ['echo'] }],
      inputs: [f32('signal', [1, 6])],
      outputs: [f32('echo', [1, 6])],
    });
    const imported = importOnnx(model, { context: [{ input: 'signal', keep: 2 }] });
    expect(imported.inputs).toEqual([{ name: 'signal', dtype: 'float32', shape: [1, 4] }]);
    const module = await Module.load(imported.bytes);
    expect(await values(module, 'forward', [Tensor.float32([1, 4], [1, 2, 3, 4])])).toEqual([[0, 0, 1, 2, 3, 4]]);
    expect(await values(module, 'forward', [Tensor.float32([1, 4], [5, 6, 7, 8])])).toEqual([[3, 4, 5, 6, 7, 8]]);
    await module.dispose();
  });

  it('folds shape arithmetic and inlines an If whose condition is known', async () => {
    // The If's condition comes from Shape/Size of x: known once the shape is fixed.
    const model = onnxModel({
      nodes: [
        { op: 'Shape', inputs: ['x'], outputs: ['shape'] },
        { op: 'Size', inputs: ['shape'], outputs: ['rank'] },
        { op: 'Equal', inputs: ['rank', 'rank'], outputs: ['is2'] },
        {
          op: 'If',
          inputs: ['is2'],
          outputs: ['y'],
          graphs: {
            then_branch: {
              nodes: [{ op: 'Flatten', inputs: ['x'], outputs: ['flat'], int: { axis: 0 } }],
              inputs: [],
              outputs: [f32('flat', [1, 6])],
            },
            else_branch: { nodes: [{ op: 'Identity', inputs: ['x'], outputs: ['same'] }], inputs: [], outputs: [f32('same', [2, 3])] },
          },
        },
      ],
      inputs: [f32('x', [2, 3])],
      outputs: [f32('y', [1, 6])],
    });
    const imported = importOnnx(model);
    expect(imported.outputs).toEqual([{ name: 'y', dtype: 'float32', shape: [1, 6] }]);
    expect(imported.nodes.lowered).toBe(1);
    const module = await Module.load(imported.bytes);
    expect(await values(module, 'forward', [Tensor.float32([2, 3], [1, 2, 3, 4, 5, 6])])).toEqual([[1, 2, 3, 4, 5, 6]]);
    await module.dispose();
  });

  it('computes long float32 products blocked, or in float64 with wideAccumulation', async () => {
    const model = onnxModel({
      nodes: [{ op: 'MatMul', inputs: ['a', 'b'], outputs: ['c'] }],
      inputs: [f32('a', [2, 100]), f32('b', [100, 3])],
      outputs: [f32('c', [2, 3])],
    });
    const a = Float32Array.from({ length: 200 }, (_, i) => Math.sin(i * 0.37) * 3);
    const b = Float32Array.from({ length: 300 }, (_, i) => Math.cos(i * 0.11) * 2);
    const exact = Array.from({ length: 6 }, (_, idx) => {
      const [r, c] = [Math.floor(idx / 3), idx % 3];
      let sum = 0;
      for (let k = 0; k < 100; k++) sum += a[r * 100 + k]! * b[k * 3 + c]!;
      return sum;
    });
    for (const wideAccumulation of [false, true]) {
      const module = await Module.load(importOnnx(model, { wideAccumulation }).bytes);
      const [c] = await values(module, 'forward', [new Tensor('float32', [2, 100], a), new Tensor('float32', [100, 3], b)]);
      c!.forEach((v, i) => expect(Math.abs(v - exact[i]!)).toBeLessThan(wideAccumulation ? 4e-6 * Math.max(1, Math.abs(exact[i]!)) : 2e-5));
      expect(module.methodMeta('forward').operators.includes('dim_order_ops::_to_dim_order_copy.out')).toBe(wideAccumulation);
      await module.dispose();
    }
  });

  it('runs float32 convolutions and products with constant weights on XNNPACK unless xnnpack is false', async () => {
    // Conv1d (k3, pad 1, stride 2) -> Relu -> Conv1d (k3, stride 1, as im2col) -> flatten -> Gemm -> Sigmoid.
    const weights = (n: number, seed: number): number[] => Array.from({ length: n }, (_, i) => Math.sin(i * 0.7 + seed) * 0.3);
    const model = onnxModel({
      nodes: [
        { op: 'Conv', inputs: ['x', 'w1', 'b1'], outputs: ['c1'], ints: { kernel_shape: [3], pads: [1, 1], strides: [2] } },
        { op: 'Relu', inputs: ['c1'], outputs: ['r1'] },
        { op: 'Conv', inputs: ['r1', 'w2'], outputs: ['c2'], ints: { kernel_shape: [3] } },
        { op: 'Flatten', inputs: ['c2'], outputs: ['flat'] },
        { op: 'Gemm', inputs: ['flat', 'wg', 'bg'], outputs: ['g'], int: { transB: 1 } },
        { op: 'Sigmoid', inputs: ['g'], outputs: ['y'] },
      ],
      inputs: [f32('x', [1, 5, 12])],
      outputs: [f32('y', [1, 3])],
      initializers: [
        { name: 'w1', dims: [6, 5, 3], floats: weights(90, 1) },
        { name: 'b1', dims: [6], floats: weights(6, 2) },
        { name: 'w2', dims: [4, 6, 3], floats: weights(72, 3) },
        { name: 'wg', dims: [3, 16], floats: weights(48, 4) },
        { name: 'bg', dims: [3], floats: weights(3, 5) },
      ],
    });
    const x = Tensor.float32(
      [1, 5, 12],
      Array.from({ length: 60 }, (_, i) => Math.cos(i * 0.31)),
    );
    const outputs: number[][] = [];
    for (const xnnpack of [true, false]) {
      const module = await Module.load(importOnnx(model, { xnnpack }).bytes);
      expect(module.methodMeta('forward').delegates.length > 0).toBe(xnnpack);
      outputs.push((await values(module, 'forward', [x]))[0]!);
      await module.dispose();
    }
    outputs[0]!.forEach((v, i) => expect(Math.abs(v - outputs[1]![i]!)).toBeLessThan(1e-6));

    // More than 16 output positions: an XNNPACK convolution with H = 1 instead of im2col rows.
    const long = onnxModel({
      nodes: [{ op: 'Conv', inputs: ['x', 'w', 'b'], outputs: ['y'], ints: { kernel_shape: [3], pads: [1, 1] } }],
      inputs: [f32('x', [1, 2, 40])],
      outputs: [f32('y', [1, 4, 40])],
      initializers: [
        { name: 'w', dims: [4, 2, 3], floats: weights(24, 6) },
        { name: 'b', dims: [4], floats: weights(4, 7) },
      ],
    });
    const signal = Tensor.float32(
      [1, 2, 40],
      Array.from({ length: 80 }, (_, i) => Math.sin(i * 0.23)),
    );
    const [onDelegate, onPortable] = await Promise.all(
      [true, false].map(async (xnnpack) => {
        const module = await Module.load(importOnnx(long, { xnnpack }).bytes);
        expect(module.methodMeta('forward').delegates.length > 0).toBe(xnnpack);
        const [y] = await values(module, 'forward', [signal]);
        await module.dispose();
        return y!;
      }),
    );
    expect(onDelegate).toHaveLength(160);
    onDelegate!.forEach((v, i) => expect(Math.abs(v - onPortable![i]!)).toBeLessThan(1e-6));
  });

  it('names the node and op it cannot lower', () => {
    const model = onnxModel({
      nodes: [{ op: 'NonMaxSuppression', inputs: ['x'], outputs: ['y'], name: 'nms_1' }],
      inputs: [f32('x', [1, 4])],
      outputs: [f32('y', [1, 4])],
    });
    const error = (() => {
      try {
        importOnnx(model);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(EtnaError);
    expect((error as EtnaError).code).toBe('UNSUPPORTED_OPERATOR');
    expect((error as EtnaError).message).toContain("node 'nms_1' (NonMaxSuppression)");
  });

  it('refuses opsets before 7 for ops whose old versions differ', () => {
    expect(() => importOnnx(onnxModel(ACCUMULATOR, 6))).toThrow(/opset 6 is older than 7.*Add/);
  });

  // An If on run-time data: y = sum(x) > 0 ? Log(x) + 1 : Neg(x), both branches reading x from outside.
  const dataIf = (elseShape: number[] = [1, 4]): Uint8Array =>
    onnxModel(
      {
        nodes: [
          { op: 'ReduceSum', inputs: ['x'], outputs: ['sum'], int: { keepdims: 0 } },
          { op: 'Greater', inputs: ['sum', 'zero'], outputs: ['positive'] },
          {
            op: 'If',
            inputs: ['positive'],
            outputs: ['y'],
            name: 'gate',
            graphs: {
              then_branch: {
                nodes: [
                  { op: 'Log', inputs: ['x'], outputs: ['log'] },
                  { op: 'Add', inputs: ['log', 'one'], outputs: ['a'] },
                ],
                inputs: [],
                outputs: [f32('a', [1, 4])],
              },
              else_branch:
                elseShape.length === 2
                  ? { nodes: [{ op: 'Neg', inputs: ['x'], outputs: ['b'] }], inputs: [], outputs: [f32('b', elseShape)] }
                  : {
                      nodes: [{ op: 'ReduceSum', inputs: ['x'], outputs: ['b'], int: { keepdims: 0 } }],
                      inputs: [],
                      outputs: [f32('b', elseShape)],
                    },
            },
          },
        ],
        inputs: [f32('x', [1, 4])],
        outputs: [f32('y', [1, 4])],
        initializers: [
          { name: 'zero', dims: [], floats: [0] },
          { name: 'one', dims: [], floats: [1] },
        ],
      },
      11,
    );

  it('runs an If on run-time data as both branches and a Where, as onnxruntime runs it', async () => {
    const model = dataIf();
    const session = await ort.InferenceSession.create(model);
    for (const xnnpack of [false, true]) {
      const module = await Module.load(importOnnx(model, { xnnpack }).bytes);
      // Positive sum: then_branch (NaN from the log of -1 kept). Negative or zero: else_branch, the log's NaN not leaking.
      for (const x of [
        [1, 2, -1, 4],
        [-1, -2, 0.5, -4],
        [1, -1, 2, -2],
      ]) {
        const expected = await session.run({ x: new ort.Tensor('float32', Float32Array.from(x), [1, 4]) });
        const [y] = await values(module, 'forward', [Tensor.float32([1, 4], x)]);
        expect(y!.map((v) => (Number.isNaN(v) ? 'NaN' : v))).toEqual(
          Array.from(expected.y!.data as Float32Array, (v) => (Number.isNaN(v) ? 'NaN' : Math.fround(v))),
        );
      }
      await module.dispose();
    }
    await session.release();
  });

  it('refuses an If on run-time data whose branches give outputs of different shapes, naming them', () => {
    expect(() => importOnnx(dataIf([]))).toThrow(
      /node 'gate' \(If\): output 0 is float32 \[1,4\] in then_branch and float32 \[\] in else_branch; a condition computed at run time/,
    );
  });

  it("keeps the graph's input and output names, and run takes the same feeds as onnxruntime", async () => {
    // Names as exporters write them: punctuation, and index-like names listed out of numeric order.
    const model = onnxModel({
      nodes: [
        { op: 'Mul', inputs: ['input:0', 'attention_mask'], outputs: ['/model/logits'] },
        { op: 'Add', inputs: ['input:0', 'attention_mask'], outputs: ['3'] },
        { op: 'Sub', inputs: ['input:0', 'attention_mask'], outputs: ['2'] },
        { op: 'Add', inputs: ['total', '/model/logits'], outputs: ['total_next'] },
      ],
      inputs: [f32('input:0', [1, 3]), f32('attention_mask', [1, 3]), f32('total', [1, 3])],
      outputs: [f32('/model/logits', [1, 3]), f32('3', [1, 3]), f32('2', [1, 3]), f32('total_next', [1, 3])],
    });
    const imported = importOnnx(model, { state: [{ input: 'total', output: 'total_next' }] });
    const module = await Module.load(imported.bytes);
    const forward = module.methodMeta('forward');
    expect(forward.inputs.map((v) => v.name)).toEqual(['input:0', 'attention_mask']);
    expect(forward.outputs.map((v) => v.name)).toEqual(['/model/logits', '3', '2']);
    expect(module.methodMeta('get_state').outputs.map((v) => v.name)).toEqual([imported.stateBuffers[0]!.name]);
    expect(
      module.program
        .describe()
        .methods.find((m) => m.name === 'forward')!
        .inputs.map((v) => v.name),
    ).toEqual(['input:0', 'attention_mask']);

    const feeds = {
      'input:0': new ort.Tensor('float32', Float32Array.from([1, 2, 3]), [1, 3]),
      attention_mask: new ort.Tensor('float32', Float32Array.from([1, 0, -2]), [1, 3]),
    };
    const session = await ort.InferenceSession.create(model);
    const expected = await session.run({ ...feeds, total: new ort.Tensor('float32', new Float32Array(3), [1, 3]) });
    const outputs = await module.run('forward', feeds);
    expect(Object.keys(outputs)).toEqual(['2', '3', '/model/logits']); // JavaScript's own key order
    for (const name of ['/model/logits', '3', '2']) {
      const value = outputs[name];
      expect(value).toBeInstanceOf(Tensor);
      expect(Array.from((value as Tensor).data as Float32Array)).toEqual(Array.from(expected[name]!.data as Float32Array));
    }
    await session.release();
    await module.dispose();
  });

  it('rejects bytes that are not an ONNX model', () => {
    expect(() => importOnnx(Uint8Array.from([0x0a, 0xff]))).toThrow(EtnaError);
    expect(() => importOnnx(new Uint8Array(0))).toThrow(/empty/);
  });
});

describe('etna import-onnx', () => {
  it('writes the same program as the API and prints the methods', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-onnx-'));
    try {
      const modelPath = path.join(dir, 'acc.onnx');
      const outPath = path.join(dir, 'acc.pte');
      fs.writeFileSync(modelPath, onnxModel(ACCUMULATOR));
      const result = runCli(['import-onnx', modelPath, '-o', outPath, '--state', 'total:total_next', '--method', 'step', '--no-xnnpack']);
      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      expect(result.stdout).toContain('methods: step, reset, get_state');
      const portable = importOnnx(onnxModel(ACCUMULATOR), {
        state: [{ input: 'total', output: 'total_next' }],
        method: 'step',
        xnnpack: false,
      });
      expect(new Uint8Array(fs.readFileSync(outPath))).toEqual(portable.bytes);
      expect(runCli(['import-onnx', modelPath, '-o', outPath, '--state', 'total:total_next', '--method', 'step']).status).toBe(0);
      const lowered = importOnnx(onnxModel(ACCUMULATOR), { state: [{ input: 'total', output: 'total_next' }], method: 'step' });
      expect(new Uint8Array(fs.readFileSync(outPath))).toEqual(lowered.bytes);
      expect(lowered.bytes).not.toEqual(portable.bytes);
      const bad = runCli(['import-onnx', modelPath, '-o', outPath, '--state', 'total:nope']);
      expect(bad.status).toBe(1);
      expect(bad.stderr).toContain("no output named 'nope'");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
