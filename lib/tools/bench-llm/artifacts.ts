// The three model files of one llama-8da4w preset, written from the same
// seeded float weights, each quantized its own runtime's way: the etna .pte
// (8da4w: 4-bit codes, a bf16 scale per 32 input channels, int8 dynamic
// activations), the GGUF (Q4_0: a float16 scale per 32, llama.cpp's rounding)
// and the ONNX (MatMulNBits with the 8da4w codes and scales). They are kept
// in a cache folder (bench/cache/llm by default, git-ignored) with a stamp of
// the config and writer version they were written for; a stale or partial
// set is written again.
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { buildLlama8da4w, createLlama8da4wWeights, llama8da4wPreset, type Llama8da4wConfig, type Llama8da4wWeights } from '../examples/llama-8da4w.js';
import { writeGguf } from './gguf.js';
import { onnxLlama } from './onnx-llama.js';

/** Bumped whenever a writer's output changes, so cached files are rewritten. */
const ARTIFACTS_VERSION = 1;

export const DEFAULT_LLM_CACHE = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'bench', 'cache', 'llm');

export interface LlmArtifacts {
  readonly preset: string;
  readonly config: Llama8da4wConfig;
  readonly pte: string;
  readonly gguf: string;
  readonly onnx: string;
  /** File sizes in bytes. */
  readonly bytes: { readonly pte: number; readonly gguf: number; readonly onnx: number };
}

/** Writes `bytes` (or what `write` writes) to a temporary name, then renames it into place. */
function writeAtomically(path: string, write: (temporary: string) => void): void {
  const temporary = `${path}.partial`;
  write(temporary);
  renameSync(temporary, path);
}

/** Writes the three files of `weights` into `dir`. */
export function writeLlmArtifacts(dir: string, weights: Llama8da4wWeights): { pte: string; gguf: string; onnx: string } {
  mkdirSync(dir, { recursive: true });
  const paths = { pte: join(dir, 'model.pte'), gguf: join(dir, 'model.gguf'), onnx: join(dir, 'model.onnx') };
  writeAtomically(paths.pte, (path) => writeFileSync(path, buildLlama8da4w(weights).toPte({ xnnpack: true })));
  writeAtomically(paths.gguf, (path) => writeGguf(path, weights));
  writeAtomically(paths.onnx, (path) => writeFileSync(path, onnxLlama(weights)));
  return paths;
}

/** The preset's files in `cacheDir`, written first if missing or stale. */
export function prepareLlmArtifacts(preset: string, options: { cacheDir?: string; log?: (line: string) => void } = {}): LlmArtifacts {
  const config = llama8da4wPreset(preset);
  const dir = join(options.cacheDir ?? DEFAULT_LLM_CACHE, preset);
  const stampPath = join(dir, 'stamp.json');
  const stamp = JSON.stringify({ version: ARTIFACTS_VERSION, config });
  const paths = { pte: join(dir, 'model.pte'), gguf: join(dir, 'model.gguf'), onnx: join(dir, 'model.onnx') };
  const fresh = existsSync(stampPath) && readFileSync(stampPath, 'utf8') === stamp && Object.values(paths).every((path) => existsSync(path));
  if (!fresh) {
    options.log?.(`writing ${preset} (.pte, .gguf, .onnx) into ${dir}`);
    writeLlmArtifacts(dir, createLlama8da4wWeights(config));
    writeFileSync(stampPath, stamp);
  }
  return {
    preset,
    config,
    ...paths,
    bytes: { pte: statSync(paths.pte).size, gguf: statSync(paths.gguf).size, onnx: statSync(paths.onnx).size },
  };
}
