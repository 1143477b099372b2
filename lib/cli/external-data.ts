// The tensor list of an external data file (.ptd, "FlatTensor") for
// `etna inspect`, read by the runtime's own parser: what `inspect` accepts is
// exactly what a module given the file accepts.
import type { NativeExternalData } from '../binding.js';
import { toEtnaError } from '../errors.js';
import { native } from '../native.js';

export const EXTERNAL_DATA_IDENTIFIER = 'FT01';

export type ExternalTensor = NativeExternalData['tensors'][number];

export interface ExternalDataDescription extends NativeExternalData {
  identifier: string;
}

/** Whether `bytes` carry the .ptd identifier (bytes 4..7). */
export function isExternalData(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && String.fromCharCode(...bytes.subarray(4, 8)) === EXTERNAL_DATA_IDENTIFIER;
}

/** The tensors a .ptd file holds. Throws INVALID_PROGRAM naming what is damaged. */
export function readExternalData(bytes: Uint8Array): ExternalDataDescription {
  try {
    return { identifier: EXTERNAL_DATA_IDENTIFIER, ...native().describeExternalData(bytes) };
  } catch (error) {
    throw toEtnaError(error);
  }
}
