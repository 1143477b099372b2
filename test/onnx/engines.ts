// One ONNX model run by onnxruntime-node and by etna on the same feeds, every
// output as plain numbers: what the quantization tests compare.
import * as ort from 'onnxruntime-node';
import { expect } from 'vitest';

import { Module, Tensor } from '../../lib/index.js';
import { onnxDtype } from '../../lib/onnx/dtype.js';
import { NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';
import { importOnnx, importOnnxGraph } from '../../lib/onnx/index.js';
import { payloadNodeTypes } from '../helpers/xnnpack-payload.js';

/** The dtypes a feed may have, and their arrays. */
const ARRAYS = { float32: Float32Array, uint8: Uint8Array, int8: Int8Array, int32: Int32Array, int64: BigInt64Array } as const;
type FeedDtype = keyof typeof ARRAYS;

function feedArray(dtype: FeedDtype, data: ArrayLike<number>): Float32Array | Uint8Array | Int8Array | Int32Array | BigInt64Array {
  return dtype === 'int64' ? BigInt64Array.from(Array.from(data), (v) => BigInt(v)) : ARRAYS[dtype].from(data);
}

/** A feed's ONNX element type code (ONNX_DTYPE_CODES), shape and values. */
export type Feeds = Record<string, { type: number; shape: number[]; data: ArrayLike<number> }>;

function dtypeOf(code: number): FeedDtype {
  const dtype = onnxDtype(code);
  if (dtype === undefined || !(dtype in ARRAYS)) throw new Error(`no feed dtype for ONNX element type ${code}`);
  return dtype as FeedDtype;
}

const numbers = (data: ArrayLike<unknown>): number[] => Array.from(data, Number);

/** Every output of `model` by onnxruntime on one thread, as numbers. */
export async function runOrt(model: Uint8Array, feeds: Feeds): Promise<Record<string, number[]>> {
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const ortFeeds = Object.fromEntries(
    Object.entries(feeds).map(([name, f]) => {
      const dtype = dtypeOf(f.type);
      return [name, new ort.Tensor(dtype, feedArray(dtype, f.data), f.shape)];
    }),
  );
  const outputs = await session.run(ortFeeds);
  await session.release();
  return Object.fromEntries(Object.entries(outputs).map(([name, t]) => [name, numbers(t.data as ArrayLike<unknown>)]));
}

/** Every output of `model` by etna (portable kernels, or XNNPACK), as numbers. */
export async function runEtna(model: Uint8Array, feeds: Feeds, xnnpack: boolean): Promise<Record<string, number[]>> {
  const module = await Module.load(importOnnx(model, { xnnpack }).bytes);
  const inputs = Object.fromEntries(
    Object.entries(feeds).map(([name, f]) => [name, Tensor.from(dtypeOf(f.type), f.shape, Array.from(f.data))]),
  );
  const outputs = await module.run('forward', inputs);
  await module.dispose();
  return Object.fromEntries(Object.entries(outputs).map(([name, t]) => [name, numbers(t.toArray() as ArrayLike<unknown>)]));
}

/** Float32 feeds as typed arrays, passed to both runtimes as they are (NaN payloads included). */
export type Float32Feeds = Record<string, { shape: number[]; data: Float32Array }>;

/** The float32 output `output` of `model` by onnxruntime (one thread) and by etna (XNNPACK), as raw bits. */
export async function float32Bits(
  model: Uint8Array,
  feeds: Float32Feeds,
  output = 'y',
): Promise<{ etna: Uint32Array; onnxruntime: Uint32Array }> {
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const ortFeeds = Object.fromEntries(Object.entries(feeds).map(([name, f]) => [name, new ort.Tensor('float32', f.data.slice(), f.shape)]));
  const expected = (await session.run(ortFeeds))[output]!.data as Float32Array;
  await session.release();
  const module = await Module.load(importOnnx(model).bytes);
  const inputs = Object.fromEntries(Object.entries(feeds).map(([name, f]) => [name, new Tensor('float32', f.shape, f.data.slice())]));
  const result = (await module.run('forward', inputs))[output];
  await module.dispose();
  if (!(result instanceof Tensor) || !(result.data instanceof Float32Array)) throw new Error(`output '${output}' is not a float32 tensor`);
  const actual = result.data;
  const bits = (a: Float32Array): Uint32Array => new Uint32Array(a.buffer, a.byteOffset, a.length);
  return { etna: bits(actual), onnxruntime: bits(expected) };
}

/** The same bits in every element; the first that differs is named, in hex. */
/** float32 outputs as raw bits (float32Bits) within `relative` of onnxruntime's, plus 1e-6. */
export function expectCloseBits(actual: Uint32Array, expected: Uint32Array, relative: number): void {
  expect(actual.length).toBe(expected.length);
  const values = new Float32Array(actual.buffer, actual.byteOffset, actual.length);
  new Float32Array(expected.buffer, expected.byteOffset, expected.length).forEach((e, i) =>
    expect(Math.abs(values[i]! - e), `element ${i}`).toBeLessThanOrEqual(relative * Math.abs(e) + 1e-6),
  );
}

export function expectSameBits(actual: Uint32Array, expected: Uint32Array): void {
  expect(actual.length).toBe(expected.length);
  const at = actual.findIndex((a, i) => a !== expected[i]);
  const hex = (v: number | undefined): string => `0x${(v ?? 0).toString(16).padStart(8, '0')}`;
  expect(at, at < 0 ? '' : `element ${at}: ${hex(actual[at])} vs ${hex(expected[at])}`).toBe(-1);
}

/** The node types of the one XNNPACK delegate `model` imports to, in order. */
export function delegateNodeTypes(model: Uint8Array): NodeUnion[] {
  const { builder, exportOptions } = importOnnxGraph(model);
  const payloads = builder.export(exportOptions).program.delegatePayloads!;
  expect(payloads).toHaveLength(1);
  return payloadNodeTypes(payloads[0]!);
}
