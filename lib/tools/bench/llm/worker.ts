// One runtime at one thread count, measured in its own process so resident
// memory figures do not mix: run as `worker.ts --worker SPEC_JSON`, it prints
// one JSON line (LlmRuntimeResult).
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

import { procStatusBytes, serveWorker } from '../child.js';
import { percentile } from '../runner.js';
import type { Llama8da4wConfig } from '../../examples/llama-8da4w.js';
import { prepareLlmLoader, type LlmRuntime } from './runners.js';

export interface LlmWorkerSpec {
  readonly runtime: LlmRuntime;
  readonly threads: number;
  /** The runtime's model file. */
  readonly path: string;
  readonly config: Llama8da4wConfig;
  /** Prompt lengths timed (each from an empty cache). */
  readonly prefillLengths: readonly number[];
  /** Timed runs of each prefill length. */
  readonly prefillRepeats: number;
  /** Prompt length before the timed decode steps. */
  readonly decodeAfter: number;
  readonly decodeSteps: number;
  /** Tokens whose last log-probabilities are returned, to compare the runtimes. */
  readonly checkTokens: readonly number[];
}

export interface Timing {
  readonly minMs: number;
  readonly medianMs: number;
}

export interface LlmRuntimeResult {
  readonly runtime: LlmRuntime;
  readonly threads: number;
  readonly loadMs: number;
  /** Resident memory of the process before the load, with the runtime's library loaded. */
  readonly baselineRssBytes: number;
  /** Resident memory just after the load, above the baseline. */
  readonly rssAfterLoadBytes: number;
  /** Resident memory after all the timed calls, above the baseline. */
  readonly rssAfterRunBytes: number;
  /** By prompt length. */
  readonly prefill: Record<string, Timing>;
  readonly decode: Timing;
  /** The last position's log-probabilities after checkTokens. */
  readonly checkLogProbs: number[];
}

/** Deterministic tokens for timing: any ids above the specials will do. */
export function benchTokens(count: number, vocab: number, seed: number): number[] {
  return Array.from({ length: count }, (_, i) => 3 + ((i * 7919 + seed * 104729) % (vocab - 3)));
}

function timing(samples: readonly number[]): Timing {
  const sorted = [...samples].sort((a, b) => a - b);
  return { minMs: sorted[0]!, medianMs: percentile(sorted, 0.5) };
}

export async function measureLlmRuntime(spec: LlmWorkerSpec): Promise<LlmRuntimeResult> {
  const load = await prepareLlmLoader(spec.runtime);
  const C = spec.config;
  globalThis.gc?.();
  const baselineRssBytes = procStatusBytes('VmRSS');
  const started = performance.now();
  const runner = await load(spec.path, C, spec.threads);
  const loadMs = performance.now() - started;
  // Garbage the load left in the JS heap is not the model's memory.
  globalThis.gc?.();
  const rssAfterLoadBytes = procStatusBytes('VmRSS') - baselineRssBytes;
  try {
    const check = await runner.prefill(spec.checkTokens, true);
    const prefill: Record<string, Timing> = {};
    for (const length of spec.prefillLengths) {
      const prompt = benchTokens(length, C.vocab, length);
      await runner.prefill(prompt, false);
      const samples: number[] = [];
      for (let r = 0; r < spec.prefillRepeats; r++) {
        const t = performance.now();
        await runner.prefill(prompt, false);
        samples.push(performance.now() - t);
      }
      prefill[String(length)] = timing(samples);
    }
    await runner.prefill(benchTokens(spec.decodeAfter, C.vocab, 1), false);
    const steps = benchTokens(spec.decodeSteps, C.vocab, 2);
    const samples: number[] = [];
    for (const token of steps) {
      const t = performance.now();
      await runner.decode(token, false);
      samples.push(performance.now() - t);
    }
    return {
      runtime: spec.runtime,
      threads: spec.threads,
      loadMs,
      baselineRssBytes,
      rssAfterLoadBytes,
      rssAfterRunBytes: procStatusBytes('VmRSS') - baselineRssBytes,
      prefill,
      decode: timing(samples),
      checkLogProbs: Array.from(check!),
    };
  } finally {
    await runner.dispose();
  }
}

export const LLM_WORKER_SCRIPT = fileURLToPath(import.meta.url);

serveWorker(LLM_WORKER_SCRIPT, measureLlmRuntime);
