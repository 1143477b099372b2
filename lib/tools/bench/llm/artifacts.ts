// The three model files of one llama-8da4w preset, written from the same
// seeded float weights, each quantized its own runtime's way: the etna .pte
// (8da4w: 4-bit codes, a bf16 scale per 32 input channels, int8 dynamic
// activations), the GGUF (Q4_0: a float16 scale per 32, llama.cpp's rounding)
// and the ONNX (MatMulNBits with the 8da4w codes and scales). They are kept
// in a cache folder (bench/cache/llm by default, git-ignored) with a stamp of
// the config and writer version they were written for; a stale or partial
// set is written again.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { runWorkerChild, serveWorker } from '../child.js';
import {
  buildLlama8da4w,
  createLlama8da4wWeights,
  llama8da4wPreset,
  type Llama8da4wConfig,
  type Llama8da4wWeights,
} from '../../examples/llama-8da4w.js';
import { writeGguf } from './gguf.js';
import { onnxLlama } from './onnx-llama.js';

/** Bumped whenever a writer's output changes, so cached files are rewritten. */
const ARTIFACTS_VERSION = 1;

export const DEFAULT_LLM_CACHE = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'bench', 'cache', 'llm');

export interface LlmArtifacts {
  readonly preset: string;
  readonly config: Llama8da4wConfig;
  readonly pte: string;
  readonly gguf: string;
  readonly onnx: string;
  /** File sizes in bytes. */
  readonly bytes: { readonly pte: number; readonly gguf: number; readonly onnx: number };
}

/** Has `write` write to a temporary name, then renames it into place. */
function writeAtomically(path: string, write: (temporary: string) => void): void {
  const temporary = `${path}.partial`;
  write(temporary);
  renameSync(temporary, path);
}

export const LLM_FORMATS = ['pte', 'gguf', 'onnx'] as const;
export type LlmFormat = (typeof LLM_FORMATS)[number];

const fileName = (format: LlmFormat): string => `model.${format}`;

/** Writes one file of `weights` into `dir`; returns its path. */
export function writeLlmArtifact(dir: string, format: LlmFormat, weights: Llama8da4wWeights): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, fileName(format));
  writeAtomically(path, (temporary) => {
    if (format === 'pte') writeFileSync(temporary, buildLlama8da4w(weights).toPte({ xnnpack: true }));
    else if (format === 'gguf') writeGguf(temporary, weights);
    else writeFileSync(temporary, onnxLlama(weights));
  });
  return path;
}

interface ArtifactSpec {
  readonly dir: string;
  readonly format: LlmFormat;
  readonly config: Llama8da4wConfig;
}

const ARTIFACTS_SCRIPT = fileURLToPath(import.meta.url);

/**
 * The preset's files in `cacheDir`, written first if missing or stale. Each
 * file is written from freshly generated weights in a process of its own
 * (at llama-1b-shape a writer holds several copies of 1.2 billion weights;
 * memory goes back to the system between files), or in this process with
 * `inProcess`.
 */
export async function prepareLlmArtifacts(
  preset: string,
  options: { cacheDir?: string; inProcess?: boolean; log?: (line: string) => void } = {},
): Promise<LlmArtifacts> {
  const config = llama8da4wPreset(preset);
  const dir = join(options.cacheDir ?? DEFAULT_LLM_CACHE, preset);
  const stampPath = join(dir, 'stamp.json');
  const stamp = JSON.stringify({ version: ARTIFACTS_VERSION, config });
  const paths = { pte: join(dir, fileName('pte')), gguf: join(dir, fileName('gguf')), onnx: join(dir, fileName('onnx')) };
  const fresh =
    existsSync(stampPath) && readFileSync(stampPath, 'utf8') === stamp && Object.values(paths).every((path) => existsSync(path));
  if (!fresh) {
    rmSync(stampPath, { force: true });
    const weights = options.inProcess === true ? createLlama8da4wWeights(config) : undefined;
    for (const format of LLM_FORMATS) {
      options.log?.(`writing ${preset} as ${paths[format]}`);
      if (weights !== undefined) writeLlmArtifact(dir, format, weights);
      else await runWorkerChild<{ path: string }>(ARTIFACTS_SCRIPT, { dir, format, config } satisfies ArtifactSpec, `writing ${format}`);
    }
    writeFileSync(stampPath, stamp);
  }
  return {
    preset,
    config,
    ...paths,
    bytes: { pte: statSync(paths.pte).size, gguf: statSync(paths.gguf).size, onnx: statSync(paths.onnx).size },
  };
}

serveWorker(ARTIFACTS_SCRIPT, (spec: ArtifactSpec) =>
  Promise.resolve({ path: writeLlmArtifact(spec.dir, spec.format, createLlama8da4wWeights(spec.config)) }),
);
