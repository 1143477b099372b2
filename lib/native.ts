// Loads the compiled addon (a local build or a prebuild); its types are in
// binding.ts. Nothing outside lib/ should import this file but the test of
// the addon boundary itself (test/api/addon-boundary.test.ts).
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import type { NativeAddon } from './binding.js';

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
