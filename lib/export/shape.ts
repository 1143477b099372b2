// Shape helpers shared by the graph builder, the planner and the writer.
import { EtnaError } from '../errors.js';

export { numel } from '../shape.js';

export type Shape = readonly number[];

/** Largest rank a .pte tensor may have. */
export const MAX_RANK = 16;

export function formatShape(shape: Shape): string {
  return `[${shape.join(', ')}]`;
}

export function sameShape(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((size, i) => size === b[i]);
}

/** Validates a user-supplied shape and returns a frozen copy. */
export function checkShape(shape: Shape, what: string): Shape {
  if (!Array.isArray(shape)) throw new EtnaError('INVALID_INPUT', `${what}: shape must be an array of sizes`);
  if (shape.length > MAX_RANK) {
    throw new EtnaError('INVALID_INPUT', `${what}: rank ${shape.length} exceeds ${MAX_RANK}`);
  }
  for (const size of shape) {
    if (!Number.isInteger(size) || size < 0 || size > 0x7fffffff) {
      throw new EtnaError('INVALID_INPUT', `${what}: shape ${formatShape(shape)} has an invalid size ${String(size)}`);
    }
  }
  return Object.freeze([...shape]);
}

/** Turns a possibly negative dim into 0..rank-1, or throws naming the op. */
export function normalizeDim(op: string, dim: number, rank: number, what = 'dim'): number {
  if (!Number.isInteger(dim) || dim < -rank || dim >= rank) {
    throw new EtnaError('INVALID_INPUT', `${op}: ${what} ${String(dim)} is out of range for rank ${rank}`);
  }
  return dim < 0 ? dim + rank : dim;
}

export function alignUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}

/**
 * constant_pad_nd's `pad` list, (before, after) pairs starting from the last
 * dim, as per-dim counts. Undefined when the list is odd, negative or longer
 * than the rank allows.
 */
export function padsByDim(pad: readonly number[], rank: number): { before: number[]; after: number[] } | undefined {
  if (pad.length % 2 !== 0 || pad.length / 2 > rank || pad.some((p) => p < 0)) return undefined;
  const before = new Array<number>(rank).fill(0);
  const after = new Array<number>(rank).fill(0);
  for (let k = 0; k < pad.length / 2; k++) {
    before[rank - 1 - k] = pad[2 * k]!;
    after[rank - 1 - k] = pad[2 * k + 1]!;
  }
  return { before, after };
}
