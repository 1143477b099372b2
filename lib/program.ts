import { toEtnaError } from './errors.js';
import { native, type NativeProgram } from './native.js';
import type { ProgramDescription } from './program-types.js';

/**
 * A verified, immutable program. Loading from a path maps the file (constants
 * are not copied); loading from bytes copies them once into aligned memory.
 * Invalid bytes throw EtnaError('INVALID_PROGRAM') naming what is wrong.
 */
export class Program {
  /** @internal */
  readonly handle: NativeProgram;

  private constructor(handle: NativeProgram) {
    this.handle = handle;
  }

  static load(source: string | Uint8Array): Program {
    if (typeof source !== 'string' && !(source instanceof Uint8Array)) {
      throw toEtnaError(Object.assign(new TypeError('Program.load expects a file path or a Uint8Array'), { code: 'INVALID_INPUT' }));
    }
    try {
      return new Program(new (native().NativeProgram)(source));
    } catch (error) {
      throw toEtnaError(error);
    }
  }

  describe(): ProgramDescription {
    try {
      return this.handle.describe();
    } catch (error) {
      throw toEtnaError(error);
    }
  }

  get methodNames(): string[] {
    return this.describe().methods.map((method) => method.name);
  }
}
