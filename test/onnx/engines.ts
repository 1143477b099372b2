// One ONNX model run by onnxruntime-node and by etna on the same feeds, every
// output as plain numbers: what the quantization tests compare.
import * as ort from 'onnxruntime-node';

import { Module, Tensor } from '../../lib/index.js';
import { onnxDtype } from '../../lib/onnx/dtype.js';
import { importOnnx } from '../../lib/onnx/index.js';

/** The dtypes a feed may have, and their arrays. */
const ARRAYS = { float32: Float32Array, uint8: Uint8Array, int8: Int8Array, int32: Int32Array } as const;
type FeedDtype = keyof typeof ARRAYS;

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
      return [name, new ort.Tensor(dtype, ARRAYS[dtype].from(f.data), f.shape)];
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
