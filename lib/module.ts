import { describeValue, EtnaError, toEtnaError, withEtnaErrors } from './errors.js';
import type { NativeInput, NativeModule, NativeOutput, NativeProfileEvent } from './binding.js';
import { shareWord, type MemoryReport, type ShareMemoryArenas } from './memory.js';
import { native } from './native.js';
import {
  asyncDisposeSymbol,
  checkOptionKeys,
  checkProgramSource,
  disposeSymbol,
  mmapOption,
  Program,
  type ProgramSource,
} from './program.js';
import type { MethodDescription, ValueDescription } from './program-types.js';
import { DTYPE_TABLE, dtypeOfScalarType } from './dtypes.js';
import { keyByName, positionsOf } from './feeds.js';
import type { ProfileEvent } from './profile.js';
import { numel } from './shape.js';
import {
  arrayTypeName,
  elementOf,
  isDType,
  Tensor,
  tensorOver,
  toTensor,
  type OnnxruntimeTensorLike,
  type TensorData,
  type TensorFields,
} from './tensor.js';

/**
 * The most threads one module may ask for (`numThreads`). Past the machine's
 * cores more of them only slow calls down: a shared pool stops at the cores,
 * and an own pool's threads live as long as its module.
 */
export const MAX_NUM_THREADS = 256;

/**
 * Where a module's calls find their extra threads (`numThreads` above 1):
 * `'shared'`, the process's pool for that thread count, which every module
 * asking for it uses (at most the machine's cores); `'own'`, a pool of the
 * module's own with `numThreads` threads, which no other module's calls wait
 * on, alive as long as the module.
 */
export type ThreadPoolKind = 'shared' | 'own';

export interface ModuleOptions {
  shareMemoryArenas?: ShareMemoryArenas;
  /**
   * The most threads one call computes on, counting the call thread that runs
   * it: an integer from 1 to `MAX_NUM_THREADS` (256). Default 1, the calling
   * thread alone, since calls of different modules already run in parallel;
   * a shared pool gives at most the machine's cores (docs/performance.md).
   */
  numThreads?: number;
  /** Where the threads past the first come from; default `'shared'`. */
  threadPool?: ThreadPoolKind;
  /**
   * The program's external data (a .ptd file path or its bytes), for programs
   * that name tensors stored outside. A path is read like the program's (see `mmap`).
   */
  externalData?: ProgramSource;
  /**
   * Map the files given by path (the program's and the .ptd) instead of
   * reading them into memory; see ProgramLoadOptions.mmap for the rule that
   * comes with it: replace a mapped file by renaming a new one over it.
   */
  mmap?: boolean;
}

/** A method result. Int outputs come back as bigint, doubles as number. */
export type Value = Tensor | number | bigint | boolean | string | null;

/** A tensor argument: a Tensor, or any object with the same three fields. */
export type TensorLike = TensorFields;

/** A method argument. Int inputs may be given as number or bigint; tensors also as onnxruntime tensors. */
export type InputValue = Value | TensorLike | OnnxruntimeTensorLike;

export interface SaveStateOptions {
  /** Only these [offset, size] byte ranges of the state arena: a partial snapshot. Default: the whole state. */
  ranges?: readonly (readonly [number, number])[];
  /**
   * Write the snapshot at the start of this array (at least
   * `stateSnapshotBytes()` long, for the same ranges) instead of a new one,
   * and return the view of it that holds the snapshot: a server that saves
   * often reuses its memory. Leave it unchanged until the promise settles.
   */
  into?: Uint8Array;
}

export interface CopyStateOptions {
  /** Only these [offset, size] byte ranges of the state arena, as `saveState` takes them. Default: the whole state. */
  ranges?: readonly (readonly [number, number])[];
}

export interface ExecuteOptions {
  /** Caller-owned arrays to receive tensor outputs (by output index) instead of new ones. */
  outputs?: (TensorData | null | undefined)[];
  /**
   * Time this call: the call, each instruction and each delegate stage, kept
   * on the module for `takeProfile()`. The outputs are the same. Default: on
   * between `startProfiling()` and `endProfiling()`, else off.
   */
  profile?: boolean;
}

/** Method inputs keyed by name. */
export type Feeds = Readonly<Record<string, InputValue>>;

/** Method outputs keyed by name. */
export type NamedValues = Record<string, Value>;

export interface RunOptions {
  /** Caller-owned arrays to receive tensor outputs, keyed by output name (or by index, as for `execute`). */
  outputs?: Readonly<Record<string, TensorData>> | ExecuteOptions['outputs'];
  /** As for `execute`. */
  profile?: boolean;
}

export const MODULE_OPTIONS: readonly (keyof ModuleOptions)[] = ['shareMemoryArenas', 'numThreads', 'threadPool', 'externalData', 'mmap'];
const THREAD_POOL_KINDS: readonly ThreadPoolKind[] = ['shared', 'own'];
const EXECUTE_OPTIONS: readonly (keyof ExecuteOptions)[] = ['outputs', 'profile'];
const RUN_OPTIONS: readonly (keyof RunOptions)[] = ['outputs', 'profile'];

// The method `run(feeds)` runs when no method is named, as onnxruntime's one graph.
const DEFAULT_METHOD = 'forward';

// Numbers modules in the process, so that their profiles stay apart in one trace.
let nextModuleNumber = 1;

function describeExpected(value: ValueDescription): string {
  return value.kind === 'tensor' ? `${value.dtype}[${(value.shape ?? []).join(', ')}]` : value.kind;
}

/**
 * A program loaded with its own memory. Calls run on etna's call threads,
 * one at a time per module, in the order they were made; each call takes its
 * inputs when `execute()` is called, and every output is copied into a
 * JS-owned array before the next call starts.
 */
export class Module {
  readonly program: Program;
  // Set when the module loaded the program itself (from a path or bytes): its dispose() disposes the program too.
  private readonly ownsProgram: boolean;
  private readonly handle: NativeModule;
  private readonly methods: ReadonlyMap<string, MethodDescription>;
  // Each method's place in the addon's list: calls name their method by it.
  private readonly methodIndices: ReadonlyMap<string, number>;
  private tail: Promise<unknown> = Promise.resolve();
  private pending = 0;
  private disposed = false;
  private readonly number = nextModuleNumber++;
  private calls = 0;
  private profiling = false;
  private profileEvents: ProfileEvent[] = [];

  private constructor(program: Program, methods: ReadonlyMap<string, MethodDescription>, handle: NativeModule, ownsProgram: boolean) {
    this.program = program;
    this.ownsProgram = ownsProgram;
    this.handle = handle;
    this.methods = methods;
    this.methodIndices = new Map(handle.methodNames.map((name, index) => [name, index]));
  }

  /**
   * Loads a program from a path, bytes or a loaded Program, and allocates its
   * memory. Files are read (or mapped, with `mmap`) and verified on the thread
   * pool; bytes are copied once before this returns its promise. A module
   * loaded from a path or bytes owns the program it loads (`module.program`):
   * its `dispose()` disposes that program too. Options other than those of
   * `ModuleOptions` are refused, naming them.
   */
  static async load(source: ProgramSource | Program, options: ModuleOptions = {}): Promise<Module> {
    if (!(source instanceof Program)) checkProgramSource(source, 'Module.load');
    const checked = checkOptionKeys(options, MODULE_OPTIONS, 'Module.load');
    const { externalData } = options;
    if (externalData !== undefined) checkProgramSource(externalData, 'Module.load: externalData');
    const mmap = mmapOption(checked, 'Module.load', [source, externalData]);
    const share = shareWord(options.shareMemoryArenas);
    const numThreads = options.numThreads ?? 1;
    if (typeof numThreads !== 'number' || !Number.isInteger(numThreads) || numThreads < 1 || numThreads > MAX_NUM_THREADS) {
      throw new EtnaError(
        'INVALID_INPUT',
        `Module.load: numThreads must be an integer from 1 to ${MAX_NUM_THREADS} (MAX_NUM_THREADS), got ${describeValue(numThreads)}`,
      );
    }
    const threadPool = options.threadPool ?? 'shared';
    if (!THREAD_POOL_KINDS.includes(threadPool)) {
      throw new EtnaError('INVALID_INPUT', `Module.load: threadPool must be 'shared' or 'own', got ${describeValue(threadPool)}`);
    }
    // Read now, so that a dispose() of the program while this loads cannot take it away.
    const methods = source instanceof Program ? source.methodTable('Module.load') : undefined;
    try {
      const loaded = await native().loadModule(source instanceof Program ? source.handle : source, {
        share,
        numThreads,
        threadPool,
        mmap,
        externalData,
      });
      if (source instanceof Program && methods !== undefined) return new Module(source, methods, loaded.module, false);
      if (loaded.program === undefined) throw new EtnaError('INTERNAL', 'the addon loaded a module without its program');
      const program = Program.fromHandle(loaded.program);
      return new Module(program, program.methodTable('Module.load'), loaded.module, true);
    } catch (error) {
      throw toEtnaError(error);
    }
  }

  get methodNames(): string[] {
    this.checkLive('methodNames');
    return [...this.methods.keys()];
  }

  /**
   * The input names of `forward` (the method `run(feeds)` runs), like
   * onnxruntime's `session.inputNames`; `inputNamesOf(method)` for any other.
   * METHOD_NOT_FOUND when the program has no `forward`.
   */
  get inputNames(): readonly string[] {
    return this.inputNamesOf(this.defaultMethod());
  }

  /** The output names of `forward`, like onnxruntime's `session.outputNames`; `outputNamesOf(method)` for any other. */
  get outputNames(): readonly string[] {
    return this.outputNamesOf(this.defaultMethod());
  }

  /** The names `run(method, feeds)` takes, in the method's input order. */
  inputNamesOf(method: string): readonly string[] {
    return this.methodMeta(method).inputs.map((input) => input.name);
  }

  /** The names `run(method, feeds)` resolves to, in the method's output order. */
  outputNamesOf(method: string): readonly string[] {
    return this.methodMeta(method).outputs.map((output) => output.name);
  }

  /** Inputs, outputs, memory plan, operators and delegates of one method. */
  methodMeta(name: string): MethodDescription {
    this.checkLive(`methodMeta('${name}')`);
    const method = this.methods.get(name);
    if (method === undefined) {
      throw new EtnaError(
        'METHOD_NOT_FOUND',
        `no method named '${name}' (this program has ${this.methodNames.map((n) => `'${n}'`).join(', ') || 'no methods'})`,
      );
    }
    return method;
  }

  /**
   * Runs `name` on the thread pool. Calls queue behind each other (FIFO). The
   * inputs are taken now: changing their arrays after this returns changes
   * nothing. Everything checkable is checked before the call is queued.
   */
  execute(name: string, inputs: readonly InputValue[] = [], options: ExecuteOptions = {}): Promise<Value[]> {
    let call: PreparedCall;
    try {
      this.checkLive(`cannot run '${name}'`);
      call = this.prepare(name, inputs, options);
    } catch (error) {
      return Promise.reject(toEtnaError(error));
    }
    const callNumber = this.calls++;
    let start = (): Promise<NativeOutput[]> => this.handle.execute(call.methodIndex, call.inputs, call.buffers);
    if (call.profile) {
      start = () => {
        const startUs = native().profileClock();
        return this.handle.execute(call.methodIndex, call.inputs, call.buffers, true).then((result) => {
          // Recorded before the outputs reach the caller, so takeProfile() after an await sees the call.
          this.recordProfile('execute', name, callNumber, startUs, result.profile);
          return result.outputs;
        });
      };
    }
    // Queued: keep copies of the inputs until the call's turn comes.
    return this.enqueue(start, () => {
      call.inputs = call.inputs.map(ownCopy);
    }).then((results) => this.finish(name, results, call.buffers));
  }

  /**
   * Starts `start` now when the module is idle, else after every call queued
   * before it (`keepInputs` first takes copies of what it reads). Settles with
   * its result, or an EtnaError.
   */
  private enqueue<T>(start: () => Promise<T>, keepInputs: () => void = () => {}): Promise<T> {
    let started: Promise<T>;
    if (this.pending === 0) {
      // Idle: the native call takes what it reads right away.
      try {
        started = start();
      } catch (error) {
        return Promise.reject(toEtnaError(error));
      }
    } else {
      keepInputs();
      started = this.tail.then(start, start);
    }
    this.pending++;
    const settled = started.then(
      (result) => {
        this.pending--;
        return result;
      },
      (error: unknown) => {
        this.pending--;
        throw toEtnaError(error);
      },
    );
    this.tail = settled.catch(() => undefined);
    return settled;
  }

  /**
   * The module's state as bytes, once every call made before this has run:
   * the mem_id 2 arena its methods share (or the one method's that plans
   * it), with a header naming the format version, the program and where each
   * state tensor sits. `restoreState` on any module over the same program
   * puts it back, in this process or another. A program without state gives
   * a snapshot of no state. Refused with INVALID_INPUT when each method keeps
   * its own state (`shareMemoryArenas: false` over several such methods).
   *
   * `ranges` ([offset, size] pairs in the state arena, ascending and
   * disjoint; `methodMeta(name).state` says where each state tensor sits)
   * makes a partial snapshot of just those bytes, such as the cache rows a
   * session has filled. Restoring it writes those bytes and leaves the rest.
   */
  saveState(options: SaveStateOptions = {}): Promise<Uint8Array> {
    let snapshot: SnapshotTarget;
    try {
      this.checkLive('cannot save the state');
      snapshot = this.snapshotTarget(options);
    } catch (error) {
      return Promise.reject(toEtnaError(error));
    }
    return this.enqueue(() => this.handle.saveState(snapshot.target, false, snapshot.ranges)).then(() => snapshot.target);
  }

  /** `saveState` on the calling thread. Meant for small states and scripts. */
  saveStateSync(options: SaveStateOptions = {}): Uint8Array {
    this.checkIdle('save the state');
    return withEtnaErrors(() => {
      const { target, ranges } = this.snapshotTarget(options);
      this.handle.saveState(target, true, ranges);
      return target;
    });
  }

  /** The bytes `saveState(options)` gives: its header and the state's bytes (of `options.ranges` alone when set). */
  stateSnapshotBytes(options: Omit<SaveStateOptions, 'into'> = {}): number {
    this.checkLive('cannot size a state snapshot');
    return withEtnaErrors(() => this.handle.stateSnapshotBytes(flatRanges(options)));
  }

  // The array a snapshot of `options.ranges` (or of the whole state) is written into.
  private snapshotTarget(options: SaveStateOptions): SnapshotTarget {
    const ranges = flatRanges(options);
    const bytes = this.handle.stateSnapshotBytes(ranges);
    const { into } = options;
    if (into === undefined) return { target: largeBytes(bytes), ranges };
    if (!(into instanceof Uint8Array) || into.byteLength < bytes) {
      throw new EtnaError('INVALID_INPUT', `saveState: into must be a Uint8Array of at least ${bytes} bytes, got ${describeValue(into)}`);
    }
    return { target: into.subarray(0, bytes), ranges };
  }

  /**
   * Puts back a state `saveState` returned, once every call made before this
   * has run. The snapshot is checked whole first: one from another program,
   * another layout or cut short is refused with INVALID_INPUT, and the state
   * is then unchanged. The bytes are taken now: change them freely after
   * this returns.
   */
  restoreState(snapshot: ArrayBuffer | ArrayBufferView): Promise<void> {
    try {
      this.checkLive('cannot restore the state');
      const bytes = snapshotBytes(snapshot);
      // The bytes must be taken before this returns. An idle module takes
      // them into its state at once: one copy, where a queued restore first
      // copies them for later and copies them again when its turn comes.
      if (this.pending === 0) {
        this.handle.restoreState(bytes, true);
        return Promise.resolve();
      }
      const copy = ownBytes(bytes);
      return this.enqueue(() => this.handle.restoreState(copy, false));
    } catch (error) {
      return Promise.reject(toEtnaError(error));
    }
  }

  /**
   * Copies this module's state into `target`, a module over the same
   * program, once every call made before this on this module has run: from
   * one state arena straight into the other, with no snapshot in between
   * (a fork of a session, a stream moved to another module). `ranges` as
   * `saveState` takes them, or the whole state. `target` must be idle; its
   * calls made after this wait for the copy. A target of another program is
   * refused with INVALID_INPUT, and its state is then unchanged.
   */
  copyStateTo(target: Module, options: CopyStateOptions = {}): Promise<void> {
    try {
      this.checkLive('cannot copy the state');
      if (!(target instanceof Module))
        throw new EtnaError('INVALID_INPUT', `copyStateTo: target must be a Module, got ${describeValue(target)}`);
      if (target === this) throw new EtnaError('INVALID_INPUT', 'copyStateTo: the target is this module');
      target.checkLive('cannot receive a copied state');
      if (target.pending > 0) {
        throw new EtnaError('INVALID_INPUT', `copyStateTo: the target module has ${target.pending} call(s) in flight; await them first`);
      }
      const ranges = flatRanges(options, ['ranges'], 'copyStateTo');
      const copied = this.enqueue(() => this.handle.copyStateTo(target.handle, false, ranges));
      // The target's later calls wait for the copy; how it ended is the caller's to hear, through `copied`.
      target.enqueue(() => copied).catch(() => undefined);
      return copied;
    } catch (error) {
      return Promise.reject(toEtnaError(error));
    }
  }

  /**
   * @internal Faults in the pages under the state's `ranges` (or the whole
   * state) once every call made before this has run, leaving their bytes as
   * they are: a later copy or restore into them takes no page fault. What a
   * module loaded ahead of a fork does off the fork's path.
   */
  populateState(options: CopyStateOptions = {}): Promise<void> {
    try {
      this.checkLive('cannot populate the state');
      const ranges = flatRanges(options, ['ranges'], 'populateState');
      return this.enqueue(() => this.handle.populateState(false, ranges));
    } catch (error) {
      return Promise.reject(toEtnaError(error));
    }
  }

  /** `restoreState` on the calling thread. Meant for small states and scripts. */
  restoreStateSync(snapshot: ArrayBuffer | ArrayBufferView): void {
    this.checkIdle('restore the state');
    withEtnaErrors(() => this.handle.restoreState(snapshotBytes(snapshot), true));
  }

  // Synchronous work runs only on an idle module that is not disposed.
  private checkIdle(what: string): void {
    this.checkLive(`cannot ${what}`);
    if (this.pending > 0) {
      throw new EtnaError(
        'INTERNAL',
        `cannot ${what} synchronously while ${this.pending} call(s) are queued on this module; await them first`,
      );
    }
  }

  /** Runs `name` on the calling thread. Meant for tiny models and scripts. */
  executeSync(name: string, inputs: readonly InputValue[] = [], options: ExecuteOptions = {}): Value[] {
    this.checkIdle(`run '${name}'`);
    try {
      const call = this.prepare(name, inputs, options);
      const callNumber = this.calls++;
      if (!call.profile) return this.finish(name, this.handle.executeSync(call.methodIndex, call.inputs, call.buffers), call.buffers);
      const startUs = native().profileClock();
      const result = this.handle.executeSync(call.methodIndex, call.inputs, call.buffers, true);
      this.recordProfile('executeSync', name, callNumber, startUs, result.profile);
      return this.finish(name, result.outputs, call.buffers);
    } catch (error) {
      throw toEtnaError(error);
    }
  }

  /** `execute('forward', inputs)`. */
  forward(inputs: readonly InputValue[] = [], options: ExecuteOptions = {}): Promise<Value[]> {
    return this.execute('forward', inputs, options);
  }

  /**
   * Runs `method` with inputs keyed by name and resolves to its outputs keyed
   * by name, like onnxruntime's `session.run(feeds)`. The names are those of
   * `inputNamesOf(method)` and `outputNamesOf(method)`. Without a method name
   * (`run(feeds)`, onnxruntime's form) it runs `forward`, and refuses with
   * METHOD_NOT_FOUND, naming the methods, when the program has none.
   */
  run(method: string, feeds: Feeds, options?: RunOptions): Promise<NamedValues>;
  run(feeds: Feeds, options?: RunOptions): Promise<NamedValues>;
  async run(methodOrFeeds: string | Feeds, feedsOrOptions?: Feeds | RunOptions, maybeOptions?: RunOptions): Promise<NamedValues> {
    this.checkLive('run');
    const named = typeof methodOrFeeds === 'string';
    const method = named ? methodOrFeeds : this.defaultMethod();
    const feeds = (named ? feedsOrOptions : methodOrFeeds) as Feeds;
    const options = checkOptionKeys((named ? maybeOptions : feedsOrOptions) ?? {}, RUN_OPTIONS, `run('${method}')`) as RunOptions;
    const meta = this.methodMeta(method);
    const inputs = positionsOf(meta, 'inputs', feeds, true);
    const outputs =
      options.outputs === undefined || Array.isArray(options.outputs)
        ? options.outputs
        : positionsOf(meta, 'outputs', options.outputs, false);
    return keyByName(meta, await this.execute(method, inputs, { outputs, profile: options.profile }));
  }

  // `forward`, or METHOD_NOT_FOUND naming the methods there are.
  private defaultMethod(): string {
    if (this.methods.has(DEFAULT_METHOD)) return DEFAULT_METHOD;
    const names = this.methodNames.map((n) => `'${n}'`).join(', ') || 'none';
    throw new EtnaError(
      'METHOD_NOT_FOUND',
      `no method named, and this program has no '${DEFAULT_METHOD}' to default to (methods: ${names}); pass one, as in ` +
        `run('${this.methodNames[0] ?? 'method'}', feeds)`,
    );
  }

  /**
   * Profiles every call made from now on, as if each passed `profile: true`
   * (a call's own `profile: false` still wins). Like onnxruntime's
   * `session.startProfiling()`.
   */
  startProfiling(): void {
    this.checkLive('startProfiling');
    this.profiling = true;
  }

  /** Stops profiling calls by default and returns `takeProfile()`. */
  endProfiling(): ProfileEvent[] {
    this.checkLive('endProfiling');
    this.profiling = false;
    return this.takeProfile();
  }

  /**
   * The events of the profiled calls finished so far, in call order, and
   * forgets them (a module keeps every event until they are taken). Turn
   * them into a trace file with `toChromeTrace()`; summarise them with
   * `summarizeProfile()`.
   */
  takeProfile(): ProfileEvent[] {
    this.checkLive('takeProfile');
    const events = this.profileEvents;
    this.profileEvents = [];
    return events;
  }

  memoryReport(): MemoryReport {
    this.checkLive('memoryReport');
    return withEtnaErrors(() => this.handle.memoryReport());
  }

  /**
   * Frees the module's native memory (arenas, state, packed weights,
   * workspaces) as soon as every call made before it has finished, whatever
   * still references this object; the promise resolves then. Every later use
   * of the module (calls, methodMeta, memoryReport, profiles) throws or
   * rejects with DISPOSED. A module loaded from a path or bytes disposes its
   * program too (`module.program`), whose memory goes with its last module.
   */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    this.profileEvents = [];
    if (this.ownsProgram) this.program.dispose();
    await this.tail;
    this.handle.dispose();
  }

  /** `await using m = await Module.load(...)`: `dispose()` at the end of the scope. */
  async [asyncDisposeSymbol](): Promise<void> {
    await this.dispose();
  }

  /**
   * `using m = await Module.load(...)`: starts `dispose()` at the end of the
   * scope without waiting; calls made before it still finish, then the memory goes.
   */
  [disposeSymbol](): void {
    void this.dispose();
  }

  // DISPOSED naming `what` once dispose() has been called.
  private checkLive(what: string): void {
    if (this.disposed) throw new EtnaError('DISPOSED', `${what}: module has been disposed`);
  }

  // Checks every input, output buffer and option against the method's
  // metadata, and allocates the output buffers; nothing has run yet.
  private prepare(name: string, inputs: readonly InputValue[], options: ExecuteOptions): PreparedCall {
    const method = this.methodMeta(name);
    checkOptionKeys(options, EXECUTE_OPTIONS, `method '${name}'`);
    if (!Array.isArray(inputs)) throw new EtnaError('INVALID_INPUT', `method '${name}': inputs must be an array`);
    if (inputs.length !== method.inputs.length) {
      throw new EtnaError(
        'INVALID_INPUT',
        `method '${name}' takes ${method.inputs.length} input${method.inputs.length === 1 ? '' : 's'}, got ${inputs.length}`,
      );
    }
    const converted = inputs.map((value, i) => convertInput(name, i, value, method.inputs[i] as ValueDescription));
    const given = callerOutputs(name, method, options);
    if (options.profile !== undefined && typeof options.profile !== 'boolean') {
      throw new EtnaError('INVALID_INPUT', `method '${name}': options.profile must be a boolean, got ${typeof options.profile}`);
    }
    // Every tensor output gets a buffer, even an empty one (zero elements).
    const buffers = method.outputs.map((output, i) => given[i] ?? (output.kind === 'tensor' ? new ArrayBuffer(output.nbytes ?? 0) : null));
    return { methodIndex: this.methodIndex(name), inputs: converted, buffers, profile: options.profile ?? this.profiling };
  }

  private methodIndex(name: string): number {
    const index = this.methodIndices.get(name);
    if (index === undefined) throw new EtnaError('INTERNAL', `method '${name}' is described but the addon does not list it`);
    return index;
  }

  // Keeps one call's events: the JavaScript side (from handing the call to
  // the addon at `startUs` to its results being back) around the native ones.
  private recordProfile(api: 'execute' | 'executeSync', method: string, call: number, startUs: number, events: NativeProfileEvent[]): void {
    const module = this.number;
    const durationUs = native().profileClock() - startUs;
    this.profileEvents.push({ name: api, category: 'js', method, call, startUs, durationUs, depth: 0, index: -1, module });
    for (const event of events) {
      const { name, category, startUs: start, durationUs: duration, index } = event;
      this.profileEvents.push({
        name,
        category,
        method,
        call,
        startUs: start,
        durationUs: duration,
        depth: event.depth + 1,
        index,
        module,
      });
    }
  }

  private finish(name: string, results: NativeOutput[], buffers: (ArrayBuffer | TensorData | null)[]): Value[] {
    return results.map((result, i) => {
      if (result === null || typeof result !== 'object') return result;
      const dtype = dtypeOfScalarType(result.scalarType);
      if (dtype === undefined) {
        throw new EtnaError('INTERNAL', `method '${name}': output ${i} has ScalarType ${result.scalarType}, which JS cannot hold`);
      }
      const buffer = buffers[i];
      if (buffer instanceof ArrayBuffer) return tensorOver(dtype, result.shape, buffer);
      if (buffer === null || buffer === undefined) throw new EtnaError('INTERNAL', `method '${name}': output ${i} had no buffer`);
      return tensorOver(dtype, result.shape, buffer.buffer, buffer.byteOffset);
    });
  }
}

interface PreparedCall {
  /** The method's place in the addon's method list. */
  methodIndex: number;
  inputs: NativeInput[];
  buffers: (ArrayBuffer | TensorData | null)[];
  profile: boolean;
}

// A converted input whose tensor data no caller holds (plain values are immutable already).
interface SnapshotTarget {
  readonly target: Uint8Array;
  /** The addon's form of the ranges; undefined for the whole state. */
  readonly ranges: number[] | undefined;
}

const SAVE_STATE_OPTIONS: readonly (keyof SaveStateOptions)[] = ['ranges', 'into'];

// The addon's form of a partial snapshot's ranges: [offset, size, offset, size, ...].
function flatRanges(
  options: SaveStateOptions,
  keys: readonly string[] = SAVE_STATE_OPTIONS,
  what: 'saveState' | 'copyStateTo' | 'populateState' = 'saveState',
): number[] | undefined {
  checkOptionKeys(options, keys, what);
  const { ranges } = options;
  if (ranges === undefined) return undefined;
  const pair = (range: unknown): range is readonly [number, number] =>
    Array.isArray(range) && range.length === 2 && range.every((n) => Number.isSafeInteger(n) && n >= 0);
  if (!Array.isArray(ranges) || !ranges.every(pair)) {
    throw new EtnaError(
      'INVALID_INPUT',
      `${what}: ranges must be an array of [offset, size] pairs of whole numbers, got ${describeValue(ranges)}`,
    );
  }
  return ranges.flat();
}

// From a huge page up, a new array asks for huge pages before it is written:
// it then fills in a few page faults rather than one per 4 KiB
// (native/addon/huge_pages.h).
const LARGE_BYTES = 2 ** 21;

/** @internal A new zeroed array of `bytes`; large ones in memory that is quick to fill the first time. */
export function largeBytes(bytes: number): Uint8Array {
  const array = new Uint8Array(bytes);
  if (bytes >= LARGE_BYTES) native().adviseHugePages(array);
  return array;
}

/** A copy of `bytes` the caller cannot change, in memory as `largeBytes` makes it. */
function ownBytes(bytes: Uint8Array): Uint8Array {
  const copy = largeBytes(bytes.byteLength);
  copy.set(bytes);
  return copy;
}

/** A snapshot's bytes as a Uint8Array over the same memory; INVALID_INPUT naming `what` for anything else. */
export function snapshotBytes(snapshot: ArrayBuffer | ArrayBufferView, what = 'a state snapshot'): Uint8Array {
  if (snapshot instanceof ArrayBuffer) return new Uint8Array(snapshot);
  if (ArrayBuffer.isView(snapshot)) return new Uint8Array(snapshot.buffer, snapshot.byteOffset, snapshot.byteLength);
  throw new EtnaError('INVALID_INPUT', `${what} must be an ArrayBuffer or a view of one, got ${describeValue(snapshot)}`);
}

function ownCopy(input: NativeInput): NativeInput {
  if (typeof input !== 'object' || input === null) return input;
  return { ...input, data: input.data.slice() };
}

// The caller's output arrays by output index, each checked for type and size
// (the size of the output at its upper-bound shape).
function callerOutputs(name: string, method: MethodDescription, options: ExecuteOptions): (TensorData | null)[] {
  const outputs = options.outputs;
  if (outputs === undefined) return [];
  if (!Array.isArray(outputs)) throw new EtnaError('INVALID_INPUT', `method '${name}': options.outputs must be an array`);
  if (outputs.length > method.outputs.length) {
    throw new EtnaError(
      'INVALID_INPUT',
      `method '${name}' has ${method.outputs.length} output(s); options.outputs has ${outputs.length} entries`,
    );
  }
  return outputs.map((out, i) => {
    if (out === null || out === undefined) return null;
    const expected = method.outputs[i] as ValueDescription;
    if (expected.kind !== 'tensor' || !isDType(expected.dtype)) {
      throw new EtnaError('INVALID_INPUT', `method '${name}': output ${i} is not a tensor output`);
    }
    const typeName = arrayTypeName(expected.dtype);
    if (!ArrayBuffer.isView(out) || out.constructor.name !== typeName) {
      const got = typeof out === 'object' ? (out as object).constructor.name : typeof out;
      throw new EtnaError('INVALID_INPUT', `method '${name}': output ${i} needs a ${typeName} for ${expected.dtype}, got ${got}`);
    }
    const needed = expected.nbytes ?? 0;
    if (out.byteLength < needed) {
      throw new EtnaError(
        'INVALID_INPUT',
        `method '${name}': output ${i} (${describeExpected(expected)}) needs ${needed} bytes at its upper bound; the ${typeName} holds ` +
          `${out.byteLength}`,
      );
    }
    return out;
  });
}

function convertInput(method: string, index: number, value: InputValue, expected: ValueDescription): NativeInput {
  const at = `method '${method}': input ${index}`;
  switch (expected.kind) {
    case 'tensor': {
      const tensor = toTensor(value, at);
      if (tensor.dtype !== expected.dtype) {
        throw new EtnaError(
          'INVALID_INPUT',
          `${at}: expected ${describeExpected(expected)}, got ${tensor.dtype}[${tensor.shape.join(', ')}] (dtype differs)`,
        );
      }
      const bound = expected.shape ?? [];
      if (tensor.shape.length !== bound.length) {
        throw new EtnaError(
          'INVALID_INPUT',
          `${at}: expected ${describeExpected(expected)}, got ${tensor.dtype}[${tensor.shape.join(', ')}] (rank differs)`,
        );
      }
      const fits =
        expected.dynamism === 'static' ? tensor.shape.every((size, d) => size === bound[d]) : numel(tensor.shape) <= numel(bound);
      if (!fits) {
        const rule = expected.dynamism === 'static' ? 'shape differs' : `more elements than the bound allows`;
        throw new EtnaError(
          'INVALID_INPUT',
          `${at}: expected ${describeExpected(expected)}, got ${tensor.dtype}[${tensor.shape.join(', ')}] (${rule})`,
        );
      }
      return { scalarType: DTYPE_TABLE[tensor.dtype].scalarType, shape: [...tensor.shape], data: tensor.data };
    }
    case 'int':
      return elementOf('int64', value, at);
    case 'double':
      if (typeof value === 'number') return value;
      if (typeof value === 'bigint') return Number(value);
      throw new EtnaError('INVALID_INPUT', `${at}: expected a number, got ${typeof value}`);
    case 'bool':
      if (typeof value === 'boolean') return value;
      throw new EtnaError('INVALID_INPUT', `${at}: expected a boolean, got ${typeof value}`);
    case 'string':
      if (typeof value === 'string') return value;
      throw new EtnaError('INVALID_INPUT', `${at}: expected a string, got ${typeof value}`);
    case 'none':
      if (value === null || value === undefined) return null;
      throw new EtnaError('INVALID_INPUT', `${at}: expected null, got ${typeof value}`);
    default:
      throw new EtnaError('INVALID_INPUT', `${at}: ${expected.kind} inputs are not supported`);
  }
}
