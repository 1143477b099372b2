// The native addon's surface as TypeScript sees it, and the words it takes and
// reports. A leaf: it imports no runtime module, so native.ts and module.ts
// both depend on it and not on each other. `etna` re-exports its user types only.
import { EtnaError } from './errors.js';
import type { ProfileCategory } from './profile.js';
import type { ProgramDescription } from './program-types.js';

/**
 * How methods share planned memory.
 * - `true`: one activation arena (mem_id 1) and one state arena (mem_id 2) for the whole module.
 * - `false`: every method its own arenas (ExecuTorch's default); state does not carry across methods.
 * - `'state'`: share only mem_id 2 (for programs that keep per-method buffers in mem_id 1).
 * - `'auto'` (default): `true` when two or more methods plan a mem_id 2 arena, else `false`.
 */
export type ShareMemoryArenas = boolean | 'state' | 'auto';

/**
 * The one place the sharing option becomes the word the addon parses: the
 * same words users give (`true`, `false`, `'state'`, `'auto'`) and the CLI's
 * `--share` takes. The module reports the resolved choice as
 * `MemoryReport.mode`: `true` -> 'shared', `'state'` -> 'state',
 * `false` -> 'unshared'; `'auto'` resolves to 'shared' or 'unshared'.
 */
export const SHARE_WORDS = ['true', 'false', 'state', 'auto'] as const;
export type ShareWord = (typeof SHARE_WORDS)[number];

export function shareWord(value: ShareMemoryArenas | undefined): ShareWord {
  if (value === undefined) return 'auto';
  if (value === true || value === false || value === 'state' || value === 'auto') return String(value) as ShareWord;
  throw new EtnaError('INVALID_INPUT', `shareMemoryArenas must be true, false, 'state' or 'auto', got ${JSON.stringify(value)}`);
}

/** The option value a share word stands for (the inverse of `shareWord`). */
export function shareOption(word: ShareWord): ShareMemoryArenas {
  return word === 'true' ? true : word === 'false' ? false : word;
}

export interface ArenaReport {
  memoryId: number;
  bytes: number;
  shared: boolean;
  /**
   * Borrowed from the program's pool for each call instead of owned: the
   * module's mem_id 1 when it shares arenas and nothing is loaded into mem_id 1.
   */
  pooled: boolean;
  methods: string[];
}

/**
 * What a module holds. Without sharing, methods load on first use, so their
 * arenas and delegate memory appear once each has run.
 */
export interface MemoryReport {
  /** The resolved sharing: 'shared' (`true`), 'state' (`'state'`) or 'unshared' (`false`). */
  mode: 'shared' | 'state' | 'unshared';
  /** Why that mode was chosen. */
  reason: string;
  arenas: ArenaReport[];
  /** Arena bytes the methods use: the module's own plus the pooled activation arena (`pooledArenaBytes`). */
  plannedBytes: number;
  /** What one set of arenas per method would need. */
  unsharedPlannedBytes: number;
  /** Bytes of the distinct constants the methods read, each counted once; read in place from the program's bytes (copied or mapped once per program, not per module). */
  constantBytes: number;
  /**
   * Delegate weights this module uses, in the form the delegate runs them
   * (packed weights and padded constant copies), whether or not other modules
   * share them.
   */
  packedWeightBytes: number;
  /**
   * The part of `packedWeightBytes` that other live modules over the same
   * `Program` use too: it exists once per program, not once per module.
   * `packedWeightBytes - sharedPackedWeightBytes` is what this module alone keeps alive.
   */
  sharedPackedWeightBytes: number;
  /** Delegate scratch memory the module uses: its own plus what it borrows (`pooledWorkspaceBytes`). */
  workspaceBytes: number;
  /**
   * The activation arena (mem_id 1) each call borrows from the program's pool,
   * which holds one per call in flight over the program; 0 when the module owns it.
   */
  pooledArenaBytes: number;
  /** The delegate workspace each call borrows from the program's pool; 0 when the module owns its workspaces. */
  pooledWorkspaceBytes: number;
  /** What this module alone keeps alive: its own arenas (its state) and workspaces, and weights no other module uses. */
  ownedBytes: number;
  /**
   * What it uses that the program holds for all its modules: shared weights
   * (`sharedPackedWeightBytes`) and the pooled arena and workspace.
   */
  sharedBytes: number;
  /** Per method: the constant bytes it reads (methods may read the same constants; `constantBytes` counts them once). */
  methods: { name: string; constantBytes: number }[];
}

export interface NativeProgram {
  describe(): ProgramDescription;
  readonly fileSize: number;
  /** Drops this handle's reference; modules over the program keep theirs. */
  dispose(): void;
}

/** A tensor result: its bytes are in the output buffer passed to the call. */
export interface NativeTensorOutput {
  dtype: string;
  shape: number[];
  byteLength: number;
}

export type NativeOutput = NativeTensorOutput | bigint | number | boolean | string | null;

/** A natively recorded profile event; lib/module.ts adds the call's method, number and module. */
export interface NativeProfileEvent {
  name: string;
  category: Exclude<ProfileCategory, 'js'>;
  startUs: number;
  durationUs: number;
  /** 0 for the call, 1 for its instructions, 2 for delegate stages. */
  depth: number;
  index: number;
}

/** What a profiled call resolves to. */
export interface NativeProfiledResult {
  outputs: NativeOutput[];
  profile: NativeProfileEvent[];
}

export interface NativeModule {
  readonly methodNames: string[];
  memoryReport(): MemoryReport;
  /** Takes the inputs before returning (call only while the module is idle); runs on the thread pool. */
  execute(method: string, inputs: unknown[], outputs: (ArrayBuffer | ArrayBufferView | null)[]): Promise<NativeOutput[]>;
  /** With `profile` true, the call also records its events. */
  execute(method: string, inputs: unknown[], outputs: (ArrayBuffer | ArrayBufferView | null)[], profile: true): Promise<NativeProfiledResult>;
  executeSync(method: string, inputs: unknown[], outputs: (ArrayBuffer | ArrayBufferView | null)[]): NativeOutput[];
  executeSync(method: string, inputs: unknown[], outputs: (ArrayBuffer | ArrayBufferView | null)[], profile: true): NativeProfiledResult;
  dispose(): void;
}

/** A .ptd file's tensors as the runtime's own parser reads them. */
export interface NativeExternalData {
  segments: number;
  tensors: { key: string; dtype: string | null; shape: number[] | null; bytes: number }[];
}

export interface NativeAddon {
  /** Parses .ptd bytes with the parser modules use; INVALID_PROGRAM naming what is damaged. */
  describeExternalData(bytes: ArrayBuffer | ArrayBufferView): NativeExternalData;
  /** Loads on the calling thread; `mmap` applies to a path only. */
  NativeProgram: new (source: string | ArrayBuffer | ArrayBufferView, mmap: boolean) => NativeProgram;
  /**
   * Reads and verifies a path or bytes (copied before it returns) on the
   * thread pool, then loads the module; `program` is set unless one was given.
   */
  /** Now on the clock of profile events, in microseconds. */
  profileClock(): number;
  loadModule(
    program: NativeProgram | string | ArrayBuffer | ArrayBufferView,
    options: { share: ShareWord; numThreads: number; threadPool: 'shared' | 'own'; mmap: boolean; externalData?: string | ArrayBuffer | ArrayBufferView },
  ): Promise<{ module: NativeModule; program?: NativeProgram }>;
}

