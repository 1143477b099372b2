import { describeValue, EtnaError, withEtnaErrors } from './errors.js';
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

const PROGRAM_LOAD_OPTIONS: readonly (keyof ProgramLoadOptions)[] = ['mmap'];

/** Checks a program source; throws INVALID_INPUT naming `caller` otherwise. */
export function checkProgramSource(source: unknown, caller: string): asserts source is ProgramSource {
  if (typeof source !== 'string' && !(source instanceof ArrayBuffer) && !ArrayBuffer.isView(source)) {
    if (source instanceof SharedArrayBuffer) {
      throw new EtnaError(
        'INVALID_INPUT',
        `${caller} takes a SharedArrayBuffer through a view of it (new Uint8Array(sab)), not the buffer itself`,
      );
    }
    throw new EtnaError(
      'INVALID_INPUT',
      `${caller} expects a file path, an ArrayBuffer or a view of one (Buffer, typed array, DataView), got ${describeValue(source)}`,
    );
  }
}

/**
 * `options` as an object of `known` keys only; INVALID_INPUT naming `caller`
 * and the unknown keys otherwise (a misspelt option must not be ignored).
 */
export function checkOptionKeys(options: unknown, known: readonly string[], caller: string): Readonly<Record<string, unknown>> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new EtnaError(
      'INVALID_INPUT',
      `${caller}: options must be an object, got ${Array.isArray(options) ? 'an array' : describeValue(options)}`,
    );
  }
  const unknown = Object.keys(options).filter((key) => !known.includes(key));
  if (unknown.length > 0) {
    const list = (keys: readonly string[]): string => keys.map((key) => `'${key}'`).join(', ');
    throw new EtnaError(
      'INVALID_INPUT',
      `${caller}: unknown option${unknown.length === 1 ? '' : 's'} ${list(unknown)} (known: ${list(known)})`,
    );
  }
  return options as Readonly<Record<string, unknown>>;
}

/**
 * The `mmap` option as a boolean; INVALID_INPUT naming `caller` for anything
 * but a boolean or undefined, and for `true` when no file is given by path
 * (`paths`: the sources the call reads, by path or otherwise), since only
 * files can be mapped.
 */
export function mmapOption(options: Readonly<Record<string, unknown>>, caller: string, paths: readonly unknown[]): boolean {
  const mmap = options.mmap;
  if (mmap !== undefined && typeof mmap !== 'boolean') {
    throw new EtnaError('INVALID_INPUT', `${caller}: mmap must be a boolean, got ${describeValue(mmap)}`);
  }
  if (mmap === true && !paths.some((source) => typeof source === 'string')) {
    throw new EtnaError(
      'INVALID_INPUT',
      `${caller}: mmap maps files given by path; here nothing is (bytes are copied, a loaded Program is used as it is)`,
    );
  }
  return mmap === true;
}

// Symbol.dispose and Symbol.asyncDispose (for `using`), which Node defines
// from 20.4 on as the registered symbols below; an older Node 20 gets the
// same symbols, so a polyfill that uses them (as Node's own does) matches.
export const disposeSymbol: typeof Symbol.dispose = (Symbol.dispose ?? Symbol.for('nodejs.dispose')) as typeof Symbol.dispose;
export const asyncDisposeSymbol: typeof Symbol.asyncDispose = (Symbol.asyncDispose ??
  Symbol.for('nodejs.asyncDispose')) as typeof Symbol.asyncDispose;

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
  private disposed = false;

  private constructor(handle: NativeProgram) {
    this.handle = handle;
  }

  static load(source: ProgramSource, options: ProgramLoadOptions = {}): Program {
    checkProgramSource(source, 'Program.load');
    const mmap = mmapOption(checkOptionKeys(options, PROGRAM_LOAD_OPTIONS, 'Program.load'), 'Program.load', [source]);
    return withEtnaErrors(() => new Program(new (native().NativeProgram)(source, mmap)));
  }

  /** @internal Wraps a program the addon loaded (Module.load does, on the thread pool). */
  static fromHandle(handle: NativeProgram): Program {
    return new Program(handle);
  }

  /**
   * @internal Each method's description by name, read once (a Program never
   * changes) and frozen: every module over the program validates its calls
   * against these same objects. DISPOSED naming `caller` once disposed.
   */
  methodTable(caller: string): ReadonlyMap<string, MethodDescription> {
    this.checkLive(caller);
    this.methods ??= new Map(this.describe().methods.map((method) => [method.name, deepFreeze(method)]));
    return this.methods;
  }

  describe(): ProgramDescription {
    this.checkLive('describe');
    return withEtnaErrors(() => this.handle.describe());
  }

  get methodNames(): string[] {
    return this.describe().methods.map((method) => method.name);
  }

  /**
   * Drops the program. Its native memory (the file's copy or mapping, packed
   * weights, pooled arenas) is freed now when no module uses it, whatever
   * still references this object, else when the last module over it is
   * disposed: those modules keep working. After it, `describe()`,
   * `methodNames` and `Module.load(program)` throw DISPOSED. Disposing twice
   * does nothing.
   */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.methods = undefined;
    this.handle.dispose();
  }

  /** `using program = Program.load(...)`: `dispose()` at the end of the scope. */
  [disposeSymbol](): void {
    this.dispose();
  }

  /** `await using` works too; disposing a program never waits. */
  async [asyncDisposeSymbol](): Promise<void> {
    this.dispose();
  }

  /** @internal DISPOSED naming `what` once the program has been disposed. */
  checkLive(what: string): void {
    if (this.disposed) throw new EtnaError('DISPOSED', `${what}: the program has been disposed`);
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const field of Object.values(value)) deepFreeze(field);
    Object.freeze(value);
  }
  return value;
}
