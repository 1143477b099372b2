// Loads the compiled addon (a local build or a prebuild) and types its small
// internal surface. Nothing outside lib/ should import this file.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import type { MemoryReport } from './module.js';
import type { ProgramDescription } from './program-types.js';

export interface NativeProgram {
  describe(): ProgramDescription;
  readonly fileSize: number;
}

/** A tensor result: its bytes are in the output buffer passed to the call. */
export interface NativeTensorOutput {
  dtype: string;
  shape: number[];
  byteLength: number;
}

export type NativeOutput = NativeTensorOutput | bigint | number | boolean | string | null;

export interface NativeModule {
  readonly methodNames: string[];
  memoryReport(): MemoryReport;
  /** Takes the inputs before returning (call only while the module is idle); runs on the thread pool. */
  execute(method: string, inputs: unknown[], outputs: (ArrayBuffer | ArrayBufferView | null)[]): Promise<NativeOutput[]>;
  executeSync(method: string, inputs: unknown[], outputs: (ArrayBuffer | ArrayBufferView | null)[]): NativeOutput[];
  dispose(): void;
}

export interface NativeAddon {
  /** Loads on the calling thread; `mmap` applies to a path only. */
  NativeProgram: new (source: string | ArrayBuffer | ArrayBufferView, mmap: boolean) => NativeProgram;
  /**
   * Reads and verifies a path or bytes (copied before it returns) on the
   * thread pool, then loads the module; `program` is set unless one was given.
   */
  loadModule(
    program: NativeProgram | string | ArrayBuffer | ArrayBufferView,
    options: { share: string; numThreads: number; mmap: boolean; externalData?: string | ArrayBuffer | ArrayBufferView },
  ): Promise<{ module: NativeModule; program?: NativeProgram }>;
}

const require = createRequire(import.meta.url);
const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let addon: NativeAddon | undefined;

export function native(): NativeAddon {
  if (addon === undefined) {
    const load = require('node-gyp-build') as (dir: string) => NativeAddon;
    addon = load(packageRoot);
  }
  return addon;
}
