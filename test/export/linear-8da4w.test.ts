// 8da4w linears: weights quantized at export the way torchao does it for
// export_llama, lowered to a per-token int8 Convert feeding a FullyConnected
// over 4-bit codes with bf16 group scales, and run by the delegate.
import { describe, expect, it } from 'vitest';

import { ProgramBuilder } from '../../lib/export/index.js';
import { Lcg } from '../../lib/random.js';
import {
  bf16Bits,
  bf16Value,
  dequantizeInt4Groups,
  packInt4Rows,
  perTokenInt8Row,
  quantizeInt4Groups,
  roundHalfEven,
} from '../../lib/export/quantize.js';
import {
  Datatype,
  NodeUnion,
  PerChannelGroupQuant,
  QuantizedTensorValue,
  QuantParams,
  ValueUnion,
} from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { Module, Tensor } from '../../lib/index.js';
import { payloadGraph } from '../helpers/xnnpack-payload.js';

const ROWS = 3;
const IN = 64;
const OUT = 24;

const values = (count: number, seed: number, scale: number): Float32Array => new Lcg(seed).signedFloat32(count, scale);

const weight = values(OUT * IN, 5, 0.3);
const bias = values(OUT, 6, 0.1);

function build(): ProgramBuilder {
  const program = new ProgramBuilder();
  const w = program.linear8da4wWeight('proj.weight', [OUT, IN], weight, { groupSize: 32 });
  const b = program.constant('proj.bias', 'float32', [OUT], bias);
  program.method('forward', (m) => m.output(m.linear(m.input('x', 'float32', [1, ROWS, IN]), w, b)));
  return program;
}

// y = perTokenInt8(x) . dequantized(W)^T + b, in double.
function reference(x: Float32Array): Float32Array {
  const w = dequantizeInt4Groups(quantizeInt4Groups(weight, OUT, IN, 32));
  const y = new Float32Array(ROWS * OUT);
  for (let r = 0; r < ROWS; r++) {
    const row = perTokenInt8Row(x.subarray(r * IN, (r + 1) * IN));
    for (let n = 0; n < OUT; n++) {
      let sum = bias[n]!;
      for (let k = 0; k < IN; k++) sum += row[k]! * w[n * IN + k]!;
      y[r * OUT + n] = sum;
    }
  }
  return y;
}

describe('8da4w linear', () => {
  it('quantizes like torchao: scale max|w|/7.5 per group, codes rounded half to even and clamped to [-8, 7]', () => {
    // Scale 0.9375 / 7.5 = 0.125 exactly, so every w / scale below is exact (ties included).
    const group = [0.9375, -0.125, 0.0625, 0.1875, -0.9375, 0.875, 0, 0.375];
    const q = quantizeInt4Groups(group, 1, 8, 8);
    expect(bf16Value(q.scalesBf16[0]!)).toBe(0.125);
    expect(Array.from(q.codes)).toEqual([7, -1, 0, 2, -8, 7, 0, 3]);
    expect(Array.from(packInt4Rows(q))).toEqual([0x7f, 0xa8, 0xf0, 0xb8]); // code + 8, even element low
    expect(roundHalfEven(2.5)).toBe(2);
    expect(roundHalfEven(-1.5)).toBe(-2);
    expect(bf16Value(bf16Bits(1 + 2 ** -8))).toBe(1); // ties to even
    expect(bf16Value(bf16Bits(1 + 3 * 2 ** -8))).toBe(1 + 2 ** -6);
    expect(() => quantizeInt4Groups(group, 1, 8, 3)).toThrow(/group size 3/);
  });

  it('lowers to Convert(qdint8) + FullyConnected(qbint4, bf16 group scales)', () => {
    const lowered = build().export({ xnnpack: true });
    const graph = payloadGraph(lowered.program.delegatePayloads![0]!);
    const types = Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!.nodeType());
    // The [1, rows, in] input is viewed as a matrix and the result viewed back.
    expect(types).toEqual([NodeUnion.XNNStaticReshape, NodeUnion.XNNConvert, NodeUnion.XNNFullyConnected, NodeUnion.XNNStaticReshape]);
    const quantized = Array.from({ length: graph.valuesLength() }, (_, i) => graph.values(i)!)
      .filter((v) => v.valueType() === ValueUnion.QuantizedTensorValue)
      .map((v) => v.value(new QuantizedTensorValue()) as QuantizedTensorValue);
    expect(quantized.map((q) => q.tensorValue()!.datatype()).sort((a, b) => a - b)).toEqual([Datatype.qdint8, Datatype.qbint4]);
    const filter = quantized.find((q) => q.quantParamsType() === QuantParams.PerChannelGroupQuant)!;
    const params = filter.quantParams(new PerChannelGroupQuant()) as PerChannelGroupQuant;
    expect(params.groupSize()).toBe(32);
    expect(params.scaleBf16Length()).toBe(OUT * (IN / 32));
    expect(params.scaleBf16(0)).toBe(quantizeInt4Groups(weight, OUT, IN, 32).scalesBf16[0]);
  });

  it('runs in the delegate and matches the dequantized reference with per-token int8 activations', async () => {
    const module = await Module.load(build().export({ xnnpack: true }).bytes);
    const x = values(ROWS * IN, 9, 2);
    const [y] = await module.execute('forward', [Tensor.float32([1, ROWS, IN], x)]);
    const want = reference(x);
    const got = (y as Tensor).data as Float32Array;
    expect((y as Tensor).shape).toEqual([1, ROWS, OUT]);
    // Int32 dot products are exact; what remains is float32 accumulation over 2 blocks.
    for (let i = 0; i < want.length; i++) expect(Math.abs(got[i]! - want[i]!)).toBeLessThan(1e-4 * Math.max(1, Math.abs(want[i]!)));
    await module.dispose();
  });

  it('without lowering runs in float32 on the dequantized weights', async () => {
    const module = await Module.load(build().toPte());
    const x = values(ROWS * IN, 9, 2);
    const [y] = await module.execute('forward', [Tensor.float32([1, ROWS, IN], x)]);
    const w = dequantizeInt4Groups(quantizeInt4Groups(weight, OUT, IN, 32));
    const got = (y as Tensor).data as Float32Array;
    for (let n = 0; n < OUT; n++) {
      let sum = bias[n]!;
      for (let k = 0; k < IN; k++) sum += x[k]! * w[n * IN + k]!;
      expect(Math.abs(got[n]! - sum)).toBeLessThan(1e-4);
    }
    await module.dispose();
  });
});
