// The XNNPACK lowering pass: lowered programs compute what their portable
// versions compute, payloads follow the XH00/XN01 format, and constants live
// in named data under the SHA-256 of their bytes.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { ProgramBuilder, type ExportResult } from '../../lib/export/index.js';
import { buildExample, EXAMPLE_NAMES, exampleReference } from '../../lib/tools/examples/index.js';
import { Binary, NodeUnion, StaticTranspose, TensorValue as XnnTensorValue } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Tensor } from '../../lib/index.js';
import { Lcg } from '../../lib/random.js';
import { payloadGraph } from '../helpers/xnnpack-payload.js';

const randomValues = (count: number, seed: number, scale = 1): Float32Array => new Lcg(seed).signedFloat32(count, scale);

function maxRelativeError(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++)
    worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!) / Math.max(1, Math.abs(expected[i]!)));
  return worst;
}

function instructionKinds(result: ExportResult): string[] {
  return result.program.methods.flatMap((method) => method.instructions.map((instruction) => instruction.kind));
}

// Every op the pass lowers, with broadcasting, scalars, a relu it fuses and one it cannot.
function buildOperatorProgram(): ProgramBuilder {
  const program = new ProgramBuilder();
  const w1 = program.constant('w1', 'float32', [24, 16], randomValues(24 * 16, 1, 0.3));
  const b1 = program.constant('b1', 'float32', [24], randomValues(24, 2, 0.1));
  const w2 = program.constant('w2', 'float32', [12, 24], randomValues(12 * 24, 3, 0.3));
  const right = program.constant('right', 'float32', [24, 5], randomValues(24 * 5, 4, 0.3));
  program.method('forward', (m) => {
    const x = m.input('x', 'float32', [4, 16]);
    const y = m.input('y', 'float32', [1, 12]);
    const h = m.relu(m.linear(x, w1, b1));
    const g = m.sigmoid(m.linear(h, w2));
    const mixed = m.sub(m.mul(g, y), m.div(g, m.add(m.relu(y), 2)));
    const t = m.tanh(m.sub(1, m.mul(mixed, 0.5)));
    m.output(m.softmax(m.gelu(t), -1), m.matmul(h, right), m.relu(x));
  });
  return program;
}

function buildConvProgram(): ProgramBuilder {
  const program = new ProgramBuilder();
  const w1 = program.constant('conv1.weight', 'float32', [8, 3, 3, 3], randomValues(8 * 3 * 9, 5, 0.3));
  const b1 = program.constant('conv1.bias', 'float32', [8], randomValues(8, 6, 0.1));
  const w2 = program.constant('conv2.weight', 'float32', [8, 2, 3, 3], randomValues(8 * 2 * 9, 7, 0.3));
  program.method('forward', (m) => {
    const x = m.input('x', 'float32', [1, 3, 12, 10]);
    const a = m.relu(m.conv2d(x, w1, b1, { padding: 1 }));
    const b = m.conv2d(a, w2, null, { stride: 2, padding: [1, 0], groups: 4 });
    m.output(m.tanh(b), m.add(a, 1));
  });
  return program;
}

// What imported 1-D convolutions lower to: pad, slices, cat, select and sqrt around a linear.
function buildDataMovementProgram(): ProgramBuilder {
  const program = new ProgramBuilder();
  const w = program.constant('w', 'float32', [12, 6], randomValues(12 * 6, 8, 0.3));
  program.method('forward', (m) => {
    const x = m.input('x', 'float32', [1, 2, 5]);
    const state = m.input('state', 'float32', [2, 1, 6]);
    const padded = m.graph.addTensor('float32', [1, 2, 7]);
    m.kernel('aten::constant_pad_nd.out', [x, { intList: [1, 1] }, { double: 0.5 }, padded]);
    const rows = [0, 2, 4].map((l) => m.reshape(m.slice(padded, 2, l, l + 3), [1, 1, 6]));
    const columns = m.reshape(m.cat(rows, 1), [3, 6]);
    const wide = m.cat([columns, m.select(state, 0, 1)], 0);
    const magnitude = m.graph.addTensor('float32', [4, 6]);
    m.kernel('aten::sqrt.out', [m.mul(wide, wide), magnitude]);
    m.output(m.linear(magnitude, w));
  });
  return program;
}

// Attention over a [context, heads, headDim] cache: keys permuted to [heads, headDim, context] feed bmm.
function buildAttentionProgram(): ProgramBuilder {
  const program = new ProgramBuilder();
  const w = program.constant('w', 'float32', [6, 8], randomValues(48, 21, 0.3));
  program.method('forward', (m) => {
    const queries = m.input('q', 'float32', [4, 3, 8]);
    const cache = m.input('cache', 'float32', [20, 4, 8]);
    const probabilities = m.softmax(m.matmul(queries, m.permute(cache, [1, 2, 0])), -1); // [4, 3, 20]
    const context = m.matmul(probabilities, m.permute(cache, [1, 0, 2])); // [4, 3, 8]
    m.output(m.linear(context, w));
  });
  return program;
}

// Activations and elementwise kernels the authoring layer writes directly, one after another.
function buildActivationProgram(): ProgramBuilder {
  const program = new ProgramBuilder();
  program.method('forward', (m) => {
    const x = m.input('x', 'float32', [3, 16]);
    const other = m.input('other', 'float32', [3, 16]);
    const apply = (name: string, input: number, ...args: ({ double: number } | { string: string } | number)[]): number => {
      const out = m.graph.addTensor('float32', [3, 16]);
      m.kernel(name, [input, ...args, out]);
      return out;
    };
    const silu = apply('aten::silu.out', x);
    const leaky = apply('aten::leaky_relu.out', silu, { double: 0.2 });
    const squared = apply('aten::pow.Tensor_Scalar_out', leaky, { double: 2 });
    const cubed = apply('aten::pow.Tensor_Scalar_out', x, { double: 3 });
    const reciprocal = apply('aten::pow.Tensor_Scalar_out', m.add(squared, 1), { double: -1 });
    const larger = apply('aten::maximum.out', cubed, other);
    const smaller = apply('aten::minimum.out', larger, reciprocal);
    const magnitude = apply('aten::abs.out', apply('aten::neg.out', smaller));
    const logged = apply('aten::log.out', apply('aten::exp.out', magnitude));
    const root = apply('aten::rsqrt.out', m.add(logged, 1));
    const waves = m.add(apply('aten::sin.out', root), apply('aten::cos.out', logged));
    const unsqueezed = m.graph.addTensor('float32', [3, 1, 16]);
    m.kernel('aten::unsqueeze_copy.out', [waves, { int: 1 }, unsqueezed]);
    const squeezed = m.graph.addTensor('float32', [3, 16]);
    m.kernel('aten::squeeze_copy.dims_out', [unsqueezed, { intList: [1] }, squeezed]);
    m.output(apply('aten::gelu.out', squeezed, { string: 'tanh' }));
  });
  return program;
}

async function runBoth(build: () => ProgramBuilder, inputs: Tensor[]): Promise<{ lowered: ExportResult; worst: number }> {
  const portable = await Module.load(build().toPte());
  const lowered = build().export({ xnnpack: true });
  const module = await Module.load(lowered.bytes);
  const want = await portable.execute('forward', inputs);
  const got = await module.execute('forward', inputs);
  expect(got.length).toBe(want.length);
  let worst = 0;
  want.forEach((expected, i) => {
    const actual = got[i] as Tensor;
    expect(actual.shape).toEqual((expected as Tensor).shape);
    worst = Math.max(worst, maxRelativeError(actual.data as Float32Array, (expected as Tensor).data as Float32Array));
  });
  expect(module.memoryReport().packedWeightBytes).toBeGreaterThan(0);
  await Promise.all([portable.dispose(), module.dispose()]);
  return { lowered, worst };
}

describe('XNNPACK lowering matches the portable kernels', () => {
  it('linear (with and without bias, [K, N] weights), arithmetic with broadcast and scalars, activations, softmax', async () => {
    const inputs = [Tensor.float32([4, 16], randomValues(64, 11)), Tensor.float32([1, 12], randomValues(12, 12))];
    const { lowered, worst } = await runBoth(buildOperatorProgram, inputs);
    expect(worst).toBeLessThan(1e-4);
    expect(instructionKinds(lowered)).toEqual(['delegate']);
    const graph = payloadGraph(lowered.program.delegatePayloads![0]!);
    const types = Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!.nodeType());
    for (const type of [
      NodeUnion.XNNFullyConnected,
      NodeUnion.XNNAdd,
      NodeUnion.XNNSubtract,
      NodeUnion.XNNMultiply,
      NodeUnion.XNNDiv,
      NodeUnion.XNNClamp,
      NodeUnion.XNNSigmoid,
      NodeUnion.XNNTanh,
      NodeUnion.XNNGelu,
      NodeUnion.XNNSoftmax,
    ]) {
      expect(types, NodeUnion[type]).toContain(type);
    }
    // Three linears; the relu after the first is fused into it, the two on inputs are Clamp nodes.
    expect(types.filter((t) => t === NodeUnion.XNNFullyConnected)).toHaveLength(3);
    expect(types.filter((t) => t === NodeUnion.XNNClamp)).toHaveLength(2);
    const fused = Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!).find(
      (n) => n.nodeType() === NodeUnion.XNNFullyConnected && n.outputMinMax() !== null,
    );
    expect(fused?.outputMinMax()?.outputMin()).toBe(0);
    expect(fused?.outputMinMax()?.outputMax()).toBe(Infinity);
  });

  it('conv2d (padding, stride, groups) with a fused relu, NCHW in and out', async () => {
    const inputs = [Tensor.float32([1, 3, 12, 10], randomValues(360, 13))];
    const { lowered, worst } = await runBoth(buildConvProgram, inputs);
    expect(worst).toBeLessThan(1e-4);
    expect(instructionKinds(lowered)).toEqual(['delegate']);
    const graph = payloadGraph(lowered.program.delegatePayloads![0]!);
    const types = Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!.nodeType());
    expect(types.filter((t) => t === NodeUnion.XNNConv2d)).toHaveLength(2);
    // One transpose in, one per NCHW output; none between the two convolutions.
    expect(types.filter((t) => t === NodeUnion.XNNStaticTranspose)).toHaveLength(3);
  });

  it('constant pad, slices, cat, select and sqrt stay inside the delegate', async () => {
    const inputs = [Tensor.float32([1, 2, 5], randomValues(10, 14)), Tensor.float32([2, 1, 6], randomValues(12, 15))];
    const { lowered, worst } = await runBoth(buildDataMovementProgram, inputs);
    expect(worst).toBeLessThan(1e-5);
    expect(instructionKinds(lowered)).toEqual(['delegate']);
    const graph = payloadGraph(lowered.program.delegatePayloads![0]!);
    const types = Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!.nodeType());
    for (const type of [
      NodeUnion.XNNStaticConstantPad,
      NodeUnion.XNNStaticSlice,
      NodeUnion.XNNConcatenate3,
      NodeUnion.XNNConcatenate2,
      NodeUnion.XNNSquareRoot,
      NodeUnion.XNNFullyConnected,
    ]) {
      expect(types, NodeUnion[type]).toContain(type);
    }
  });

  it('silu, leaky_relu, pow by 2, 3 and -1, maximum, minimum, abs, neg, exp, log, rsqrt, sin, cos, unsqueeze, squeeze and tanh-form gelu: one delegate call', async () => {
    const inputs = [Tensor.float32([3, 16], randomValues(48, 31, 2)), Tensor.float32([3, 16], randomValues(48, 32, 2))];
    const { lowered, worst } = await runBoth(buildActivationProgram, inputs);
    expect(worst).toBeLessThan(1e-5);
    expect(instructionKinds(lowered)).toEqual(['delegate']);
    const graph = payloadGraph(lowered.program.delegatePayloads![0]!);
    const types = Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!.nodeType());
    for (const type of [
      NodeUnion.XNNSigmoid,
      NodeUnion.XNNLeakyReLU,
      NodeUnion.XNNSquare,
      NodeUnion.XNNDiv,
      NodeUnion.XNNMaximum,
      NodeUnion.XNNMinimum,
      NodeUnion.XNNAbs,
      NodeUnion.XNNNegate,
      NodeUnion.XNNExp,
      NodeUnion.XNNLog,
      NodeUnion.XNNReciprocalSquareRoot,
      NodeUnion.XNNSin,
      NodeUnion.XNNCos,
      NodeUnion.XNNStaticReshape,
      NodeUnion.XNNTanh,
    ]) {
      expect(types, NodeUnion[type]).toContain(type);
    }
  });

  it('bmm reading a permute that moves the innermost dim takes a row-copied operand with transposed B', async () => {
    const inputs = [Tensor.float32([4, 3, 8], randomValues(96, 22)), Tensor.float32([20, 4, 8], randomValues(640, 23))];
    const { lowered, worst } = await runBoth(buildAttentionProgram, inputs);
    expect(worst).toBeLessThan(1e-5);
    const graph = payloadGraph(lowered.program.delegatePayloads![0]!);
    const nodes = Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!);
    const perms = nodes
      .filter((n) => n.nodeType() === NodeUnion.XNNStaticTranspose)
      .map((n) => Array.from((n.node(new StaticTranspose()) as StaticTranspose).permArray()!));
    // Both permutes now keep the cache's innermost dim innermost.
    expect(perms).toEqual([
      [1, 0, 2],
      [1, 0, 2],
    ]);
    const flags = nodes
      .filter((n) => n.nodeType() === NodeUnion.XNNBatchMatrixMultiply)
      .map((n) => (n.node(new Binary()) as Binary).flags());
    expect(flags).toEqual([1, 0]);
  });

  for (const name of EXAMPLE_NAMES) {
    it(`${name} lowered: 20 calls match the reference within 1e-4, weights packed`, async () => {
      const lowered = buildExample(name).export({ xnnpack: true });
      expect(instructionKinds(lowered)).toContain('delegate');
      const module = await Module.load(lowered.bytes, { shareMemoryArenas: true });
      const reference = exampleReference(name);
      let worst = 0;
      for (const call of reference.session().slice(0, 20)) {
        const want = reference.execute(call.method, call.inputs);
        const got = await module.execute(call.method, call.inputs);
        want.forEach((expected, i) => {
          worst = Math.max(worst, maxRelativeError((got[i] as Tensor).data as Float32Array, expected.data as Float32Array));
        });
      }
      expect(worst).toBeLessThan(1e-4);
      expect(module.memoryReport().packedWeightBytes).toBeGreaterThan(0);
      await module.dispose();
    });
  }
});

describe('XNNPACK payloads and named data', () => {
  it('writes XH00 + XN01 with every constant in named data under its SHA-256', () => {
    const result = buildExample('encoder-decoder').export({ xnnpack: true });
    const named = new Map(result.program.namedData!.map((blob) => [blob.key, blob.data]));
    expect(named.size).toBeGreaterThan(0);
    for (const [key, data] of named) expect(key).toBe(createHash('sha256').update(data).digest('hex'));
    // Both methods read the same weights: stored once in named data, not in the constant segment.
    expect(result.program.constants).toHaveLength(0);

    for (const payload of result.program.delegatePayloads!) {
      const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
      expect([...payload.subarray(0, 4)]).toEqual([0, 0, 0, 0]);
      expect(new TextDecoder().decode(payload.subarray(4, 8))).toBe('XH00');
      expect(view.getUint16(8, true)).toBe(30);
      expect(view.getUint32(10, true)).toBe(32);
      const fbSize = view.getUint32(14, true);
      expect(view.getUint32(18, true)).toBe(32 + Math.ceil(fbSize / 16) * 16);
      expect(view.getBigUint64(22, true)).toBe(0n);
      expect(new TextDecoder().decode(payload.subarray(36, 40))).toBe('XN01');
      const graph = payloadGraph(payload);
      expect(graph.constantDataLength()).toBeGreaterThan(1);
      expect(graph.constantData(0)!.size()).toBe(0n);
      for (let i = 1; i < graph.constantDataLength(); i++) {
        const entry = graph.constantData(i)!;
        expect(entry.offset()).toBe(0xffff_ffff_ffff_ffffn);
        expect(Number(entry.size())).toBe(named.get(entry.namedKey()!)!.byteLength);
      }
    }
  });

  it('DelegateCall arguments are the run inputs, then its outputs, matching external ids', () => {
    const result = buildOperatorProgram().export({ xnnpack: true });
    const method = result.program.methods[0]!;
    const call = method.instructions[0]!;
    expect(call.kind).toBe('delegate');
    const args = call.args;
    expect(args.slice(0, 2)).toEqual(method.inputs);
    expect(args.slice(2)).toEqual(method.outputs);
    const graph = payloadGraph(result.program.delegatePayloads![0]!);
    expect(graph.numExterns()).toBe(args.length);
    const externals: [number, number][] = [];
    for (let i = 0; i < graph.valuesLength(); i++) {
      const tensor = graph.values(i)!.value(new XnnTensorValue()) as XnnTensorValue;
      if (tensor.flags() !== 0) externals.push([tensor.externalId(), tensor.flags()]);
    }
    externals.sort((a, b) => a[0] - b[0]);
    expect(externals).toEqual(args.map((_, i) => [i, i < 2 ? 1 : 2]));
  });

  it('is off unless asked for, and can be turned off explicitly', () => {
    expect(instructionKinds(buildOperatorProgram().export())).not.toContain('delegate');
    expect(instructionKinds(buildOperatorProgram().export({ xnnpack: false }))).not.toContain('delegate');
    expect(buildOperatorProgram().export().program.namedData ?? []).toHaveLength(0);
  });

  it('leaves unsupported operators as kernel calls between delegate calls', () => {
    const result = buildExample('kv-decoder').export({ xnnpack: true });
    const prefill = result.program.methods.find((m) => m.name === 'prefill')!;
    const kinds = prefill.instructions.map((i) => i.kind);
    expect(kinds).toContain('kernel');
    expect(kinds).toContain('delegate');
    const operators = prefill.operators.map((op) => op.name);
    expect(operators).toContain('aten::native_layer_norm');
    expect(operators).toContain('aten::index_put_');
    expect(operators).not.toContain('aten::addmm');
  });
});
