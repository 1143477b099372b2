// Weight transforms of the XNNPACK lowering: the named-data key of a
// constant, and the method's weights rearranged or dequantized into the
// layouts and forms the delegate's nodes read.
import { createHash } from 'node:crypto';

import type { ConstantTensor } from '../graph.js';
import type { DequantizedConstant, TensorQuantization } from './partition.js';
import type { XnnQuantization } from './payload.js';

/** Lowercase hex SHA-256: the named-data key of a constant. */
export function constantKey(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

const keyCache = new WeakMap<ConstantTensor, string>();

export function keyOfConstant(constant: ConstantTensor): string {
  let key = keyCache.get(constant);
  if (key === undefined) {
    key = constantKey(constant.bytes);
    keyCache.set(constant, key);
  }
  return key;
}

export function float32Bytes(values: Float32Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

// Conv filters go from the method's [O, I, KH, KW] to the delegate's [O, KH, KW, I].
export function ohwi<T extends Float32Array | Int8Array>(source: T, shape: readonly number[]): T {
  const [o, i, kh, kw] = shape as [number, number, number, number];
  const target = source.slice() as T;
  for (let oc = 0; oc < o; oc++) {
    for (let ic = 0; ic < i; ic++) {
      for (let y = 0; y < kh; y++) {
        for (let x = 0; x < kw; x++) target[((oc * kh + y) * kw + x) * i + ic] = source[((oc * i + ic) * kh + y) * kw + x]!;
      }
    }
  }
  return target;
}

/** The codes of a dequantized constant, as stored (int8 weights or int32 biases). */
export function codesOf(constant: ConstantTensor): Int8Array | Int32Array {
  const bytes = constant.bytes.slice();
  return constant.dtype === 'int8' ? new Int8Array(bytes.buffer) : new Int32Array(bytes.buffer);
}

/** A dequantized constant's float32 values, code * scale of its channel along `axis`, as the dequantize kernel computes them. */
export function dequantizedValues(constant: ConstantTensor, op: DequantizedConstant): Float32Array {
  const codes = codesOf(constant);
  const inner = constant.shape.slice(op.axis + 1).reduce((a, b) => a * b, 1);
  const channels = constant.shape[op.axis]!;
  // float(code) * scale in float32, as the kernel computes it (an int32 code past 2^24 rounds first).
  return Float32Array.from(codes, (code, i) => Math.fround(Math.fround(code) * op.scales[Math.floor(i / inner) % channels]!));
}

/** The XNNPACK form of an 8-bit static quantization: every value is qint8, a uint8 one shifted by -128 (the same real values). */
export function qint8Of(q: TensorQuantization): XnnQuantization {
  return { kind: 'perTensor', datatype: 'qint8', scale: q.scale, zeroPoint: q.zeroPoint - (q.dtype === 'uint8' ? 128 : 0) };
}

// Transposed conv filters go from the method's [I, O / G, KH, KW] to the delegate's [O, KH, KW, I / G].
export function transposedConvFilter(constant: ConstantTensor, groups: number): Uint8Array {
  const [inChannels, groupOut, kh, kw] = constant.shape as [number, number, number, number];
  const groupIn = inChannels / groups;
  const source = new Float32Array(constant.bytes.slice().buffer);
  const target = new Float32Array(source.length);
  for (let g = 0; g < groups; g++) {
    for (let oc = 0; oc < groupOut; oc++) {
      for (let ic = 0; ic < groupIn; ic++) {
        for (let y = 0; y < kh; y++) {
          for (let x = 0; x < kw; x++) {
            target[(((g * groupOut + oc) * kh + y) * kw + x) * groupIn + ic] =
              source[(((g * groupIn + ic) * groupOut + oc) * kh + y) * kw + x]!;
          }
        }
      }
    }
  }
  return float32Bytes(target);
}
