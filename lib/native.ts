// Loads the compiled addon (a local build or a prebuild) and types its small
// internal surface. Nothing outside lib/ should import this file.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import type { ProgramDescription } from './program-types.js';

export interface NativeProgram {
  describe(): ProgramDescription;
  readonly fileSize: number;
}

export interface NativeAddon {
  NativeProgram: new (source: string | Uint8Array) => NativeProgram;
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
