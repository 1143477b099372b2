import { EtnaError, toEtnaError } from './errors.js';
import type { NativeProgram } from './binding.js';
import { native } from './native.js';
import type { MethodDescription, ProgramDescription } from './program-types.js';

/** Where a program comes from: a file path, or its bytes (an ArrayBuffer, Buffer, typed array or DataView). */
export type ProgramSource = string | ArrayBuffer | ArrayBufferView;

export interface ProgramLoadOptions {
  /**
   * Map a file given by path instead of reading it into memory (default
   * false). Constants then stay in the page cache, shared with other
   * processes. Replace a mapped file by renaming a new file over it, never by
   * writing into it: once the file is truncated or written in place, calls
   * reject with INVALID_PROGRAM (a change during a call can still crash the
   * process). Bytes are always copied; this option does not apply to them.
   */
  mmap?: boolean;
}

/** Checks a program source; throws INVALID_INPUT naming `caller` otherwise. */
export function checkProgramSource(source: unknown, caller: string): asserts source is ProgramSource {
  if (typeof source !== 'string' && !(source instanceof ArrayBuffer) && !ArrayBuffer.isView(source)) {
    throw new EtnaError('INVALID_INPUT', `${caller} expects a file path, an ArrayBuffer or a view of one (Buffer, typed array, DataView), got ${describeValue(source)}`);
  }
}

/** The `mmap` option as a boolean; throws INVALID_INPUT naming `caller` for anything but a boolean or undefined. */
export function mmapOption(options: unknown, caller: string): boolean {
  if (typeof options !== 'object' || options === null) {
    throw new EtnaError('INVALID_INPUT', `${caller}: options must be an object, got ${describeValue(options)}`);
  }
  const mmap = (options as { mmap?: unknown }).mmap;
  if (mmap !== undefined && typeof mmap !== 'boolean') {
    throw new EtnaError('INVALID_INPUT', `${caller}: mmap must be a boolean, got ${describeValue(mmap)}`);
  }
  return mmap === true;
}

export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return value.constructor?.name ?? 'object';
  return typeof value === 'string' ? JSON.stringify(value) : `${typeof value} ${String(value)}`;
}

/**
 * A verified, immutable program. From a path the file is read into one
 * aligned private copy (on the calling thread, like readFileSync; Module.load
 * reads on the thread pool instead), or mapped with `{ mmap: true }`. Bytes
 * are copied once into aligned memory. Invalid bytes throw
 * EtnaError('INVALID_PROGRAM') naming what is wrong.
 */
export class Program {
  /** @internal */
  readonly handle: NativeProgram;

  private methods: ReadonlyMap<string, MethodDescription> | undefined;

  private constructor(handle: NativeProgram) {
    this.handle = handle;
  }

  static load(source: ProgramSource, options: ProgramLoadOptions = {}): Program {
    checkProgramSource(source, 'Program.load');
    const mmap = mmapOption(options, 'Program.load');
    try {
      return new Program(new (native().NativeProgram)(source, mmap));
    } catch (error) {
      throw toEtnaError(error);
    }
  }

  /** @internal Wraps a program the addon loaded (Module.load does, on the thread pool). */
  static fromHandle(handle: NativeProgram): Program {
    return new Program(handle);
  }

  /**
   * @internal Each method's description by name, read once (a Program never
   * changes) and frozen: every module over the program validates its calls
   * against these same objects.
   */
  methodTable(): ReadonlyMap<string, MethodDescription> {
    this.methods ??= new Map(this.describe().methods.map((method) => [method.name, deepFreeze(method)]));
    return this.methods;
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

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const field of Object.values(value)) deepFreeze(field);
    Object.freeze(value);
  }
  return value;
}
