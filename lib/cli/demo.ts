// `etna demo`: the kv-decoder example generating text greedily, with its
// memory shared across methods and without, next to onnxruntime running the
// same model as one session per method. Each configuration runs in its own
// child process so their resident memory does not mix.
import { formatBytes, table } from '../format.js';
import { withTemporaryDirectory } from '../tools/bench/child.js';
import { prepareArtifacts, runInChild } from '../tools/bench/harness.js';
import { matchLabel } from '../tools/bench/report.js';
import { availableConfigs, onnxruntimeAvailable, type BenchResult } from '../tools/bench/runner.js';
import { KV_DECODER_CONFIG } from '../tools/examples/index.js';
import type { Command } from './command.js';

export interface DemoOptions {
  steps: number;
  threads: number;
}

const ms = (value: number | undefined): string => (value === undefined ? '-' : `${value.toFixed(3)} ms`);

export function formatDemoTable(results: readonly BenchResult[]): string {
  const header = ['', ...results.map((r) => r.config)];
  const row = (label: string, cell: (r: BenchResult) => string): string[] => [label, ...results.map(cell)];
  return table([
    header,
    row('outputs match reference', (r) => (r.outputsMatch ? `yes (max error ${r.maxError.toExponential(1)})` : matchLabel(r))),
    row('planned arena bytes', (r) => (r.plannedBytes === null ? '-' : formatBytes(r.plannedBytes))),
    row('peak RSS', (r) => formatBytes(r.peakRssBytes)),
    row('RSS before load', (r) => formatBytes(r.baselineRssBytes)),
    row('packed-weight bytes', (r) => (r.packedWeightBytes === null ? '-' : formatBytes(r.packedWeightBytes))),
    row('load time', (r) => ms(r.loadMs)),
    row('prefill (8 tokens)', (r) => ms(r.sessionLatency.prefill?.p50Ms)),
    row('per-token decode p50', (r) => ms(r.sessionLatency.decode?.p50Ms)),
    row('per-token decode p95', (r) => ms(r.sessionLatency.decode?.p95Ms)),
  ]);
}

// Prefill fills the first chunk; each decode step takes the next position.
const MAX_STEPS = KV_DECODER_CONFIG.context - KV_DECODER_CONFIG.prefillLength;

export const DEMO: Command = {
  spec: {
    name: 'demo',
    brief: 'kv-decoder with shared and unshared memory, side by side',
    summary:
      'Builds the kv-decoder example in memory, runs prefill (8 tokens) and N greedy decode steps with\n' +
      'shareMemoryArenas true and false, and with onnxruntime (state passed as inputs and outputs),\n' +
      'and compares every output with the TypeScript reference.',
    options: [
      { name: 'steps', value: 'N', help: `greedy decode steps, 1 to ${MAX_STEPS} (default 32)` },
      { name: 'threads', value: 'N', help: 'threads per runtime (default 1)' },
    ],
  },
  run: (args) => runDemo({ steps: args.integer('steps', 32, 1, MAX_STEPS), threads: args.integer('threads', 1, 1) }),
};

export async function runDemo(options: DemoOptions): Promise<number> {
  const results = await withTemporaryDirectory(async (dir) => {
    const artifacts = prepareArtifacts('kv-decoder', dir);
    const collected: BenchResult[] = [];
    for (const config of availableConfigs()) {
      process.stderr.write(`running kv-decoder as ${config}...\n`);
      collected.push(
        await runInChild({
          program: 'kv-decoder',
          config,
          threads: options.threads,
          iterations: 0,
          warmup: 0,
          session: 'generate',
          decodeSteps: options.steps,
          artifacts,
        }),
      );
    }
    return collected;
  });
  console.log(`kv-decoder: prefill 8 tokens, then ${options.steps} greedy decode steps, ${options.threads} thread(s)\n`);
  console.log(formatDemoTable(results));
  if (!onnxruntimeAvailable()) console.log('\n(onnxruntime-node is not installed, so its column is left out.)');
  console.log(
    '\nWithout shared arenas every method has its own copy of the KV cache, so decode does not see what\n' +
      'prefill wrote: its outputs differ from the reference by design (ExecuTorch semantics), not by error.',
  );
  const unexpected = results.filter((r) => !r.outputsMatch && !(r.config === 'etna-unshared' && r.stateful));
  return unexpected.length === 0 ? 0 : 1;
}
