// How the CLI commands show program values and outputs (lib/format.ts has
// the byte sizes and tables the tools share).
import type { Value } from '../module.js';
import type { ValueDescription } from '../program-types.js';
import { Tensor, type DType } from '../tensor.js';
import { valueToJson } from './values-json.js';

export function formatValue(value: ValueDescription): string {
  if (value.kind !== 'tensor') return `${value.name} ${value.kind}`;
  const shape = `${value.name} ${value.dtype}[${(value.shape ?? []).join('x')}]`;
  const notes: string[] = [];
  if (value.dynamism && value.dynamism !== 'static') notes.push(`${value.dynamism} shape`);
  if (!value.planned) notes.push('unplanned');
  return notes.length > 0 ? `${shape} (${notes.join(', ')})` : shape;
}

/** Tensors with more elements than this print as a summary unless `--full` is given. */
export const SUMMARY_THRESHOLD = 16;
/** Values shown at each end of a summarized tensor. */
const SUMMARY_EDGE = 3;

function elementText(dtype: DType, value: number | bigint): string {
  if (typeof value === 'bigint') return value.toString();
  if (dtype === 'bool') return value !== 0 ? 'true' : 'false';
  return dtype === 'float32' || dtype === 'float64' ? String(Number(value.toPrecision(6))) : String(value);
}

/**
 * One line for a long tensor: dtype and shape, element count, the first and
 * last few values, then min, max and mean (NaNs counted apart). float16 and
 * bfloat16 elements are raw 16-bit patterns, so they get no statistics.
 */
export function summarizeTensor(tensor: Tensor): string {
  const data = tensor.data as ArrayLike<number | bigint>;
  const count = data.length;
  const edge = (from: number, to: number): string[] =>
    Array.from({ length: to - from }, (_, k) => elementText(tensor.dtype, data[from + k]!));
  const head =
    `${tensor.dtype}[${tensor.shape.join('x')}] ${count} values ` +
    `[${[...edge(0, SUMMARY_EDGE), '...', ...edge(count - SUMMARY_EDGE, count)].join(', ')}]`;
  if (tensor.dtype === 'float16' || tensor.dtype === 'bfloat16') return `${head} (raw 16-bit patterns)`;
  if (tensor.dtype === 'bool') {
    let trues = 0;
    for (let i = 0; i < count; i++) if (data[i] !== 0) trues++;
    return `${head} true ${trues} of ${count}`;
  }
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  let nans = 0;
  for (let i = 0; i < count; i++) {
    const value = Number(data[i]);
    if (Number.isNaN(value)) {
      nans++;
      continue;
    }
    min = Math.min(min, value);
    max = Math.max(max, value);
    sum += value;
  }
  const stat = (value: number): string => String(Number(value.toPrecision(6)));
  const stats =
    nans === count
      ? 'all NaN'
      : `min ${stat(min)} max ${stat(max)} mean ` + `${stat(sum / (count - nans))}${nans > 0 ? ` (${nans} NaN)` : ''}`;
  return `${head} ${stats}`;
}

/** An output as `etna run` prints it: JSON, or a summary for a long tensor unless `full`. */
export function formatOutput(value: Value, full: boolean): string {
  if (!full && value instanceof Tensor && value.size > SUMMARY_THRESHOLD) return summarizeTensor(value);
  return JSON.stringify(valueToJson(value));
}
