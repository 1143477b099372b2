// The JSON form of method values used by `etna run`: a tensor is
// {"dtype", "shape", "data": [...]} (data as Tensor.from takes it: int64
// as numbers or decimal strings, floats' NaN and infinities as the strings
// "NaN", "Infinity", "-Infinity"); a primitive is a bare number, boolean,
// string or null.
import { EtnaError } from '../errors.js';
import type { InputValue, Value } from '../module.js';
import type { ValueDescription } from '../program-types.js';
import { Lcg } from '../random.js';
import { isDType, Tensor, type DType, type ElementValue } from '../tensor.js';

export type JsonValue = number | string | boolean | null | { dtype: string; shape: number[]; data: (number | string | boolean | null)[] };

const BIG_TYPES = new Set<DType>(['int64', 'uint64']);

/**
 * A JSON input as the module takes it: a tensor's data goes through
 * `Tensor.from` (every element converted exactly or refused, named
 * `WHERE.data[i]`); primitives pass through to the module's own checks.
 */
export function valueFromJson(json: unknown, where: string): InputValue {
  if (json === null || typeof json === 'number' || typeof json === 'boolean' || typeof json === 'string') return json;
  if (typeof json !== 'object' || Array.isArray(json))
    throw new EtnaError('INVALID_INPUT', `${where}: expected a tensor object or a primitive`);
  const { dtype, shape, data } = json as Record<string, unknown>;
  if (!isDType(dtype)) throw new EtnaError('INVALID_INPUT', `${where}: unknown dtype ${JSON.stringify(dtype)}`);
  if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
    throw new EtnaError('INVALID_INPUT', `${where}: shape must be an array of non-negative integers`);
  }
  if (!Array.isArray(data)) throw new EtnaError('INVALID_INPUT', `${where}: data must be an array`);
  return Tensor.from(dtype, shape as number[], data as ElementValue[], `${where}.data`);
}

function jsonNumber(value: number | bigint): number | string {
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  if (Number.isNaN(value)) return 'NaN';
  if (!Number.isFinite(value)) return value > 0 ? 'Infinity' : '-Infinity';
  return value;
}

export function valueToJson(value: Value): JsonValue {
  if (value instanceof Tensor) {
    const data = Array.from(value.data as ArrayLike<number | bigint>, (v) => (value.dtype === 'bool' ? v !== 0 : jsonNumber(v)));
    return { dtype: value.dtype, shape: [...value.shape], data };
  }
  if (typeof value === 'bigint') return jsonNumber(value);
  if (typeof value === 'number') return jsonNumber(value);
  return value;
}

export const FILLS = ['zeros', 'ones', 'random'] as const;
export type Fill = (typeof FILLS)[number];

/** Inputs generated from a method's metadata (tensors at their bound shape). */
export function generateInputs(method: string, inputs: ValueDescription[], fill: Fill, seed: number): InputValue[] {
  const generator = new Lcg(seed);
  const random = (): number => generator.next();
  return inputs.map((input, i) => {
    if (input.kind === 'none') return null;
    if (input.kind !== 'tensor' || !isDType(input.dtype)) {
      throw new EtnaError('INVALID_INPUT', `method '${method}': input ${i} is a ${input.kind}; pass it with --inputs`);
    }
    const tensor = Tensor.zeros(input.dtype, input.shape ?? []);
    const target = tensor.data as unknown as { [k: number]: number | bigint };
    const big = BIG_TYPES.has(input.dtype);
    for (let k = 0; k < tensor.size; k++) {
      const value =
        fill === 'zeros'
          ? 0
          : fill === 'ones'
            ? 1
            : input.dtype === 'bool'
              ? random() < 0.5
                ? 0
                : 1
              : big || input.dtype.startsWith('int') || input.dtype.startsWith('uint')
                ? Math.floor(random() * 10)
                : random() * 2 - 1;
      target[k] = big ? BigInt(value) : value;
    }
    return tensor;
  });
}
