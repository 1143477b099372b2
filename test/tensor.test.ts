// Tensor construction, factories and toTensor: every failure is an
// EtnaError('INVALID_INPUT') that names what was wrong.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { EtnaError, Tensor, toTensor, type DType, type TensorData } from '../lib/index.js';

function thrown(action: () => unknown): EtnaError {
  let caught: unknown;
  try {
    action();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(EtnaError);
  expect((caught as EtnaError).code).toBe('INVALID_INPUT');
  return caught as EtnaError;
}

// Calls the way plain JavaScript (or a cast) would, past the compiler's checks.
const untyped = Tensor as unknown as {
  new (...args: unknown[]): Tensor;
  float32(...args: unknown[]): Tensor;
  int64(...args: unknown[]): Tensor;
  zeros(...args: unknown[]): Tensor;
};

describe('Tensor construction', () => {
  it('keeps dtype, a frozen copy of the shape and the data array itself', () => {
    const data = new Int32Array([1, 2, 3, 4, 5, 6]);
    const shape = [2, 3];
    const t = new Tensor('int32', shape, data);
    shape[0] = 9;
    expect(t.shape).toEqual([2, 3]);
    expect(Object.isFrozen(t.shape)).toBe(true);
    expect(t.data).toBe(data);
    expect(t.size).toBe(6);
  });

  it("names onnxruntime's argument order and says which order etna takes", () => {
    const withTypedData = thrown(() => new untyped('float32', new Float32Array(4), [1, 4]));
    expect(withTypedData.message).toContain('new Tensor(dtype, shape, data)');
    expect(withTypedData.message).toContain("onnxruntime's order");
    const withPlainData = thrown(() => new untyped('float32', [1, 2, 3, 4], [1, 4]));
    expect(withPlainData.message).toContain("onnxruntime's order");
    const withoutDims = thrown(() => new untyped('int32', new Int32Array(3)));
    expect(withoutDims.message).toContain("onnxruntime's order");
  });

  it('says which array a dtype needs when the data is a plain array in etna order', () => {
    const error = thrown(() => new untyped('int32', [4], [1, 2, 3, 4]));
    expect(error.message).toMatch(/Int32Array for int32 tensors, got Array/);
    expect(error.message).not.toContain('onnxruntime');
    expect(thrown(() => new untyped('float32', [2], new Float64Array(2))).message).toMatch(/Float32Array .* got Float64Array/);
  });

  it('rejects unknown dtypes, bad shapes and element counts', () => {
    expect(thrown(() => new untyped('float99', [1], new Float32Array(1))).message).toMatch(/unknown dtype 'float99'/);
    expect(thrown(() => new untyped(undefined, [1], new Float32Array(1))).message).toMatch(/unknown dtype undefined/);
    expect(thrown(() => new Tensor('float32', [2, -1], new Float32Array(2))).message).toMatch(/shape\[1\] = number -1 is not a non-negative integer/);
    expect(thrown(() => new Tensor('float32', [1.5], new Float32Array(1))).message).toMatch(/shape\[0\] = number 1.5/);
    expect(thrown(() => new untyped('float32', '2', new Float32Array(2))).message).toMatch(/shape must be an array/);
    expect(thrown(() => new Tensor('float32', [2, 2], new Float32Array(3))).message).toMatch(/\[2, 2\] holds 4 elements, data has 3/);
  });
});

describe('Tensor factories', () => {
  it('int64 names the element that is not an integer', () => {
    expect(thrown(() => Tensor.int64([2], [1, 2.5])).message).toBe('int64 values[1] = number 2.5 is not an integer');
    expect(thrown(() => Tensor.int64([1], [Number.NaN])).message).toMatch(/values\[0\] = number NaN/);
    expect(thrown(() => untyped.int64([1], ['7'])).message).toMatch(/values\[0\] = '7' is not an integer/);
    expect(thrown(() => Tensor.int64([1], [2n ** 63n])).message).toMatch(/values\[0\] = 9223372036854775808n is outside the int64 range/);
    expect(thrown(() => Tensor.int64([1], [-(2 ** 64)])).message).toMatch(/outside the int64 range/);
    expect(thrown(() => untyped.int64([1], 5)).message).toMatch(/int64 values must be an array, got number 5/);
  });

  it('int64 keeps exact values at the ends of the range', () => {
    const t = Tensor.int64([3], [-(2n ** 63n), 2n ** 63n - 1n, -5]);
    expect(Array.from(t.data)).toEqual([-(2n ** 63n), 2n ** 63n - 1n, -5n]);
  });

  it('float32 names the element that is not a number', () => {
    expect(thrown(() => untyped.float32([2], [1, 'x'])).message).toBe("float32 values[1] = 'x' is not a number");
    expect(thrown(() => untyped.float32([1], null)).message).toMatch(/float32 values must be an array, got null/);
    expect(thrown(() => untyped.float32([1], undefined)).message).toMatch(/got undefined/);
    expect(Array.from(Tensor.float32([2], new Float64Array([0.5, -2])).data)).toEqual([0.5, -2]);
  });

  it('float32 and int64 check the shape against the values', () => {
    expect(thrown(() => Tensor.float32([3], [1, 2])).message).toMatch(/holds 3 elements, data has 2/);
    expect(thrown(() => untyped.int64(null, [1])).message).toMatch(/shape must be an array/);
  });

  it('zeros checks dtype and shape before allocating', () => {
    expect(thrown(() => untyped.zeros('complex64', [2])).message).toMatch(/unknown dtype 'complex64'/);
    expect(thrown(() => Tensor.zeros('float32', [-3])).message).toMatch(/shape\[0\] = number -3/);
    const zeros = Tensor.zeros('uint64', [2, 2]);
    expect(zeros.data).toBeInstanceOf(BigUint64Array);
    expect(Array.from(zeros.data)).toEqual([0n, 0n, 0n, 0n]);
  });

  it('is() narrows by dtype', () => {
    const t: Tensor = Tensor.float32([1], [3]);
    expect(t.is('float32')).toBe(true);
    expect(t.is('int64')).toBe(false);
  });
});

describe('toTensor', () => {
  it('returns etna tensors as they are', () => {
    const t = Tensor.float32([1], [1]);
    expect(toTensor(t)).toBe(t);
  });

  it('builds a tensor from { dtype, shape, data } and checks it like the constructor', () => {
    const data = new Int8Array([1, -2]);
    const t = toTensor({ dtype: 'int8', shape: [2], data });
    expect(t).toBeInstanceOf(Tensor);
    expect(t.data).toBe(data);
    expect(thrown(() => toTensor({ dtype: 'int8', shape: [3], data }, 'input 2')).message).toBe('input 2: shape [3] holds 3 elements, data has 2');
  });

  it('reads onnxruntime tensors of every dtype both runtimes have', () => {
    const cases: [DType, TensorData][] = [
      ['float32', new Float32Array([1.5, -2])],
      ['float64', new Float64Array([1.5, -2])],
      ['int64', new BigInt64Array([1n, -2n])],
      ['uint64', new BigUint64Array([1n, 2n])],
      ['int32', new Int32Array([1, -2])],
      ['uint32', new Uint32Array([1, 2])],
      ['int16', new Int16Array([1, -2])],
      ['uint16', new Uint16Array([1, 2])],
      ['int8', new Int8Array([1, -2])],
      ['uint8', new Uint8Array([1, 2])],
      ['bool', new Uint8Array([1, 0])],
    ];
    for (const [dtype, data] of cases) {
      const source = dtype === 'bool' ? new ort.Tensor('bool', [true, false], [2, 1]) : new ort.Tensor(dtype as 'float32', data as Float32Array, [2, 1]);
      const t = toTensor(source);
      expect(t.dtype).toBe(dtype);
      expect(t.shape).toEqual([2, 1]);
      expect(Array.from(t.data as ArrayLike<number | bigint>)).toEqual(Array.from(data as ArrayLike<number | bigint>));
    }
  });

  it('reads onnxruntime float16 tensors as raw 16-bit patterns', () => {
    const bits = new Uint16Array([0x3c00, 0xc000]); // 1.0, -2.0
    const t = toTensor(new ort.Tensor('float16', bits, [2]));
    expect(t.dtype).toBe('float16');
    expect(Array.from(t.data)).toEqual([0x3c00, 0xc000]);
  });

  it('refuses onnxruntime string tensors and non-CPU data, naming them', () => {
    expect(thrown(() => toTensor(new ort.Tensor('string', ['a'], [1]), 'feed x')).message).toBe('feed x: onnxruntime string tensors have no etna dtype');
    const onGpu = { type: 'float32', dims: [1], location: 'gpu-buffer', get data(): never { throw new Error('not on the CPU'); } };
    expect(thrown(() => toTensor(onGpu)).message).toMatch(/on 'gpu-buffer'; download it to the CPU first/);
    expect(thrown(() => toTensor({ type: 'int4', dims: [2], data: new Uint8Array(1) })).message).toMatch(/unknown dtype 'int4'/);
  });

  it('names what it got when the value is no tensor at all', () => {
    expect(thrown(() => toTensor(3, 'input 1')).message).toMatch(/^input 1: expected a tensor .*, got number$/);
    expect(thrown(() => toTensor(null)).message).toMatch(/got null$/);
    expect(thrown(() => toTensor({ shape: [1] })).message).toMatch(/got Object$/);
  });
});
