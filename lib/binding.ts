// The native addon's surface as TypeScript sees it: what each native object
// takes and returns. Types only: native.ts loads the addon, module.ts and
// program.ts wrap it, and the user-facing words it carries (the sharing option,
// MemoryReport) are in memory.ts.
import type { TensorData } from './dtypes.js';
import type { MemoryReport, ShareWord } from './memory.js';
import type { ProfileCategory } from './profile.js';
import type { ProgramDescription } from './program-types.js';

export interface NativeProgram {
  describe(): ProgramDescription;
  readonly fileSize: number;
  /** Drops this handle's reference; modules over the program keep theirs. */
  dispose(): void;
}

/** A tensor argument: dtypes cross as their ScalarType code (dtypes.ts). */
export interface NativeTensorInput {
  scalarType: number;
  shape: number[];
  data: TensorData;
}

export type NativeInput = NativeTensorInput | bigint | number | boolean | string | null;

/** A tensor result: its bytes are in the output buffer passed to the call. */
export interface NativeTensorOutput {
  scalarType: number;
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
  /**
   * Runs the method at `methodIndex` (its place in `methodNames`) on a call
   * thread. Takes the inputs before returning (call only while the module is idle).
   */
  execute(methodIndex: number, inputs: NativeInput[], outputs: (ArrayBuffer | ArrayBufferView | null)[]): Promise<NativeOutput[]>;
  /** With `profile` true, the call also records its events. */
  execute(
    methodIndex: number,
    inputs: NativeInput[],
    outputs: (ArrayBuffer | ArrayBufferView | null)[],
    profile: true,
  ): Promise<NativeProfiledResult>;
  executeSync(methodIndex: number, inputs: NativeInput[], outputs: (ArrayBuffer | ArrayBufferView | null)[]): NativeOutput[];
  executeSync(
    methodIndex: number,
    inputs: NativeInput[],
    outputs: (ArrayBuffer | ArrayBufferView | null)[],
    profile: true,
  ): NativeProfiledResult;
  /**
   * Bytes of this module's state snapshot, whole or of `ranges` ([offset,
   * size, ...] in the state arena); throws when the module has no one state.
   */
  stateSnapshotBytes(ranges?: number[]): number;
  /** Writes the state snapshot into `target` (exactly stateSnapshotBytes(ranges) long), on a call thread or, with `sync`, now. */
  saveState(target: Uint8Array, sync: false, ranges?: number[]): Promise<void>;
  saveState(target: Uint8Array, sync: true, ranges?: number[]): undefined;
  /** Checks `snapshot` whole, then copies it into the state; the caller keeps it unchanged until this settles. */
  restoreState(snapshot: Uint8Array, sync: false): Promise<void>;
  restoreState(snapshot: Uint8Array, sync: true): undefined;
  /** Copies the state (or its `ranges`) into `target`'s, a module of the same program; both idle. */
  copyStateTo(target: NativeModule, sync: false, ranges?: number[]): Promise<void>;
  /** Faults in the pages under the state (or its `ranges`), leaving their bytes as they are; idle. */
  populateState(sync: false, ranges?: number[]): Promise<void>;
  dispose(): void;
}

/** What `cpuInfo()` reports; paths are names such as 'avx2', 'neon-i8mm', 'scalar'. */
export interface NativeCpuInfo {
  arch: string;
  features: string[];
  paths: { dynamicLinear: string; attention: string; nanScan: string; transposes: string; matmul: string; fp32Functions: string };
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
  NativeProgram: new (
    source: string | ArrayBuffer | ArrayBufferView,
    mmap: boolean,
  ) => NativeProgram;
  /** Asks for huge pages for memory not yet written (advice: nothing changes where the system declines). */
  adviseHugePages(bytes: ArrayBuffer | ArrayBufferView): void;
  /** Now on the clock of profile events, in microseconds. */
  profileClock(): number;
  /** The CPU's architecture and vector features, and the path each kernel family chose (`etna inspect --cpu`). */
  cpuInfo(): NativeCpuInfo;
  /**
   * Reads and verifies a path or bytes (copied before it returns) on libuv's
   * thread pool, then loads the module; `program` is set unless one was given.
   */
  loadModule(
    program: NativeProgram | string | ArrayBuffer | ArrayBufferView,
    options: {
      share: ShareWord;
      numThreads: number;
      threadPool: 'shared' | 'own';
      mmap: boolean;
      externalData?: string | ArrayBuffer | ArrayBufferView;
    },
  ): Promise<{ module: NativeModule; program?: NativeProgram }>;
}
