// Tensor construction, factories and toTensor: every failure is an
// EtnaError('INVALID_INPUT') that names what was wrong.
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';

import { EtnaError, Tensor, toTensor, type DType, type TensorData } from '../../lib/index.js';

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
    expect(thrown(() => new Tensor('float32', [2, -1], new Float32Array(2))).message).toMatch(
      /shape\[1\] = number -1 is not a non-negative integer/,
    );
    expect(thrown(() => new Tensor('float32', [1.5], new Float32Array(1))).message).toMatch(/shape\[0\] = number 1.5/);
    expect(thrown(() => new untyped('float32', '2', new Float32Array(2))).message).toMatch(/shape must be an array/);
    expect(thrown(() => new Tensor('float32', [2, 2], new Float32Array(3))).message).toMatch(/\[2, 2\] holds 4 elements, data has 3/);
  });
});

describe('Tensor factories', () => {
  it('int64 names the element that is not an integer', () => {
    expect(thrown(() => Tensor.int64([2], [1, 2.5])).message).toBe('int64 values[1] = number 2.5 is not an integer');
    expect(thrown(() => Tensor.int64([1], [Number.NaN])).message).toMatch(/values\[0\] = number NaN/);
    expect(thrown(() => untyped.int64([1], ['7.5'])).message).toMatch(/values\[0\] = '7.5' is not an integer/);
    expect(thrown(() => Tensor.int64([1], [2n ** 63n])).message).toMatch(
      /values\[0\] = bigint 9223372036854775808 is outside the int64 range/,
    );
    expect(thrown(() => Tensor.int64([1], [-(2 ** 64)])).message).toMatch(/outside the int64 range/);
    expect(thrown(() => untyped.int64([1], 5)).message).toMatch(/int64 values must be an array, got number 5/);
  });

  it('int64 takes decimal strings, exactly', () => {
    expect(Array.from(Tensor.int64([2], ['9223372036854775807', '-7']).data)).toEqual([2n ** 63n - 1n, -7n]);
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

  it('zeros refuses more elements than an array can hold with INVALID_INPUT, naming the shape', () => {
    expect(thrown(() => Tensor.zeros('float32', [1e6, 1e6])).message).toMatch(
      /^shape \[1000000, 1000000\] holds 1000000000000 float32 elements \(4000000000000 bytes\), more than one Float32Array can hold/,
    );
    expect(thrown(() => Tensor.zeros('int64', [2 ** 40, 2 ** 40])).message).toMatch(/more than one BigInt64Array can hold/);
  });

  it('is() narrows by dtype', () => {
    const t: Tensor = Tensor.float32([1], [3]);
    expect(t.is('float32')).toBe(true);
    expect(t.is('int64')).toBe(false);
  });
});

// Every dtype whose array stores integers, with its range.
const INTEGER_RANGES: [DType, bigint, bigint][] = [
  ['int8', -128n, 127n],
  ['uint8', 0n, 255n],
  ['int16', -32768n, 32767n],
  ['uint16', 0n, 65535n],
  ['int32', -(2n ** 31n), 2n ** 31n - 1n],
  ['uint32', 0n, 2n ** 32n - 1n],
  ['int64', -(2n ** 63n), 2n ** 63n - 1n],
  ['uint64', 0n, 2n ** 64n - 1n],
  ['bool', 0n, 1n],
  ['float16', 0n, 65535n],
  ['bfloat16', 0n, 65535n],
];

const elements = (t: Tensor): (number | bigint)[] => Array.from(t.data as ArrayLike<number | bigint>);

describe('Tensor.from', () => {
  for (const [dtype, min, max] of INTEGER_RANGES) {
    const wide = dtype === 'int64' || dtype === 'uint64';
    const stored = (v: bigint): number | bigint => (wide ? v : Number(v));

    it(`${dtype}: keeps both ends of [${min}, ${max}] exactly, as bigints, decimal strings and (when safe) numbers`, () => {
      expect(elements(Tensor.from(dtype, [2], [min, max]))).toEqual([stored(min), stored(max)]);
      expect(elements(Tensor.from(dtype, [2], [String(min), String(max)]))).toEqual([stored(min), stored(max)]);
      const safe = (v: bigint): bigint =>
        v > BigInt(Number.MAX_SAFE_INTEGER)
          ? BigInt(Number.MAX_SAFE_INTEGER)
          : v < BigInt(Number.MIN_SAFE_INTEGER)
            ? BigInt(Number.MIN_SAFE_INTEGER)
            : v;
      expect(elements(Tensor.from(dtype, [2], [Number(safe(min)), Number(safe(max))]))).toEqual([stored(safe(min)), stored(safe(max))]);
      expect(Tensor.from(dtype, [1], [0]).data).toBeInstanceOf(Tensor.zeros(dtype, [0]).data.constructor);
    });

    it(`${dtype}: refuses one past either end and fractions, naming the element and the range`, () => {
      const range = `the ${dtype} range \\[${min}, ${max}\\]`;
      expect(thrown(() => Tensor.from(dtype, [2], [0n, max + 1n])).message).toMatch(
        new RegExp(`^${dtype} values\\[1\\] = bigint ${max + 1n} is outside ${range}`),
      );
      expect(thrown(() => Tensor.from(dtype, [1], [String(min - 1n)])).message).toMatch(
        new RegExp(`values\\[0\\] = '${min - 1n}' is outside ${range}`),
      );
      expect(thrown(() => Tensor.from(dtype, [3], [0, 0, 0.5])).message).toMatch(
        new RegExp(`values\\[2\\] = number 0.5 is not an integer`),
      );
      expect(thrown(() => Tensor.from(dtype, [1], [Number.NaN])).message).toMatch(/is not an integer/);
      expect(thrown(() => Tensor.from(dtype, [1], ['1e3'])).message).toMatch(/'1e3' is not an integer/);
    });
  }

  it('int64: the wrapped token of a JSON request is refused, as string and as number', () => {
    expect(thrown(() => Tensor.from('int64', [2], [5, '18446744073709551617'], 'inputs[0].data')).message).toBe(
      "inputs[0].data[1] = '18446744073709551617' is outside the int64 range [-9223372036854775808, 9223372036854775807]",
    );
    // JSON.parse gives 18446744073709552000 for the bare number.
    expect(thrown(() => Tensor.from('int64', [1], [JSON.parse('18446744073709551617') as number])).message).toMatch(
      /is outside the int64 range/,
    );
  });

  it('int64: numbers past 2^53 - 1 are refused even inside the range, since they are no longer exact', () => {
    expect(elements(Tensor.from('int64', [2], [2 ** 53 - 1, -(2 ** 53 - 1)]))).toEqual([2n ** 53n - 1n, -(2n ** 53n - 1n)]);
    expect(thrown(() => Tensor.from('int64', [1], [2 ** 53])).message).toMatch(
      /= number 9007199254740992 is past 2\^53 - 1, .*bigint or a decimal string/,
    );
    expect(elements(Tensor.from('int64', [1], ['9007199254740993']))).toEqual([9007199254740993n]);
  });

  it('bool: takes true, false, 0 and 1 only', () => {
    expect(elements(Tensor.from('bool', [4], [true, false, 1, 0]))).toEqual([1, 0, 1, 0]);
    expect(thrown(() => Tensor.from('bool', [1], [2])).message).toMatch(/outside the bool range \[0, 1\]/);
    expect(thrown(() => Tensor.from('bool', [1], ['true'])).message).toMatch(/'true' is not an integer/);
    expect(thrown(() => Tensor.from('int8', [1], [true])).message).toMatch(/boolean true is not an integer/);
  });

  it('float16 and bfloat16 take their raw 16-bit patterns, and say so when given a value', () => {
    expect(elements(Tensor.from('float16', [2], [0x3c00, 0xfc00]))).toEqual([0x3c00, 0xfc00]);
    expect(thrown(() => Tensor.from('float16', [1], [1.5])).message).toMatch(
      /number 1.5 is not an integer \(float16 elements are raw 16-bit patterns, integers 0 to 65535\)/,
    );
    expect(thrown(() => Tensor.from('bfloat16', [1], [-1])).message).toMatch(
      /outside the bfloat16 range \[0, 65535\] \(bfloat16 elements are raw/,
    );
  });

  for (const dtype of ['float32', 'float64'] as const) {
    it(`${dtype}: numbers, and NaN and the infinities as JSON writes them; -0 stays -0`, () => {
      const t = Tensor.from(dtype, [6], [1.5, 'NaN', 'Infinity', '-Infinity', -0, Number.NaN]);
      const values = Array.from(t.data);
      expect(values.slice(0, 4)).toEqual([1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]);
      expect(Object.is(values[4], -0)).toBe(true);
      expect(values[5]).toBeNaN();
      expect(thrown(() => Tensor.from(dtype, [1], [1n])).message).toBe(`${dtype} values[0] = bigint 1 is not a number`);
      expect(thrown(() => Tensor.from(dtype, [1], ['nan'])).message).toMatch(/'nan' is not a number/);
      expect(thrown(() => Tensor.from(dtype, [1], [true])).message).toMatch(/boolean true is not a number/);
    });
  }

  it('float32 rounds to nearest, overflowing to infinity as PyTorch does', () => {
    expect(Array.from(Tensor.from('float32', [3], [0.1, 1e39, -1e39]).data)).toEqual([
      Math.fround(0.1),
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
    ]);
    expect(Array.from(Tensor.from('float64', [1], [0.1]).data)).toEqual([0.1]);
  });

  it('names its values in every message when given a name, and checks dtype, shape and count', () => {
    expect(thrown(() => Tensor.from('int8', [1], [200], 'inputs[0].data')).message).toBe(
      'inputs[0].data[0] = number 200 is outside the int8 range [-128, 127]',
    );
    expect(thrown(() => Tensor.from('int8', [3], [1, 2], 'inputs[0].data')).message).toBe(
      'inputs[0].data: shape [3] holds 3 elements, data has 2',
    );
    expect(thrown(() => Tensor.from('int9' as DType, [1], [1], 'x')).message).toMatch(/^x: unknown dtype 'int9'/);
    expect(thrown(() => Tensor.from('int8', [-1], [])).message).toMatch(/shape\[0\] = number -1/);
    expect(thrown(() => Tensor.from('int8', [1], 'a' as unknown as number[])).message).toMatch(/int8 values must be an array, got 'a'/);
  });

  it('reads TypedArrays as well as arrays', () => {
    expect(elements(Tensor.from('int16', [2], new Float64Array([-3, 7])))).toEqual([-3, 7]);
    expect(thrown(() => Tensor.from('uint8', [1], new Float64Array([256]))).message).toMatch(/outside the uint8 range/);
  });
});

describe('onnxruntime names', () => {
  it('type and dims read dtype and shape, and cannot be set', () => {
    const t = Tensor.from('int32', [2, 1], [1, 2]);
    expect(t.type).toBe('int32');
    expect(t.dims).toEqual([2, 1]);
    expect(t.dims).toBe(t.shape);
    expect(Object.isFrozen(t.dims)).toBe(true);
    expect(() => {
      (t as unknown as { dims: number[] }).dims = [9];
    }).toThrow(TypeError);
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
    expect(thrown(() => toTensor({ dtype: 'int8', shape: [3], data }, 'input 2')).message).toBe(
      'input 2: shape [3] holds 3 elements, data has 2',
    );
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
      const source =
        dtype === 'bool' ? new ort.Tensor('bool', [true, false], [2, 1]) : new ort.Tensor(dtype as 'float32', data as Float32Array, [2, 1]);
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
    expect(thrown(() => toTensor(new ort.Tensor('string', ['a'], [1]), 'feed x')).message).toBe(
      'feed x: onnxruntime string tensors have no etna dtype',
    );
    const onGpu = {
      type: 'float32',
      dims: [1],
      location: 'gpu-buffer',
      get data(): never {
        throw new Error('not on the CPU');
      },
    };
    expect(thrown(() => toTensor(onGpu)).message).toMatch(/on 'gpu-buffer'; download it to the CPU first/);
    expect(thrown(() => toTensor({ type: 'int4', dims: [2], data: new Uint8Array(1) })).message).toMatch(/unknown dtype 'int4'/);
  });

  it('names what it got when the value is no tensor at all', () => {
    expect(thrown(() => toTensor(3, 'input 1')).message).toMatch(/^input 1: expected a tensor .*, got number$/);
    expect(thrown(() => toTensor(null)).message).toMatch(/got null$/);
    expect(thrown(() => toTensor({ shape: [1] })).message).toMatch(/got Object$/);
  });
});
