// The EtnaError a call fails with: the tests' one way to catch it and check its type.
import { expect } from 'vitest';

import { EtnaError } from '../../lib/index.js';

/** The EtnaError a promise rejects with (fails the test if it resolves or rejects otherwise). */
export async function rejection(promise: Promise<unknown>): Promise<EtnaError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(EtnaError);
  return error as EtnaError;
}

/** The EtnaError an action throws (fails the test if it returns or throws otherwise). */
export function thrown(action: () => unknown): EtnaError {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(EtnaError);
    return error as EtnaError;
  }
  throw new Error('expected an EtnaError');
}
