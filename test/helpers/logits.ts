// Comparing logits in tests: the greedy token, and the largest difference
// from a reference.
import { expect } from 'vitest';

/** The index of the largest value (the first of equals): the greedy token. */
export function argmax(values: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

/** The largest absolute difference, element by element; the lengths must agree. */
export function worstDifference(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  for (let i = 0; i < expected.length; i++) worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  return worst;
}
