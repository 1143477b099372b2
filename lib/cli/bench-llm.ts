// `etna bench llm`: its options, the run (lib/tools/bench/llm/harness.ts)
// and what it prints and writes (lib/tools/bench/llm/report.ts).
import { writeFileSync } from 'node:fs';

import { EtnaError } from '../errors.js';
import { runLlmBench } from '../tools/bench/llm/harness.js';
import { formatLlmMarkdown, formatLlmReport } from '../tools/bench/llm/report.js';
import { LLM_RUNTIMES, type LlmRuntime } from '../tools/bench/llm/runners.js';
import { LLAMA_8DA4W_PRESET_NAMES } from '../tools/examples/llama-8da4w.js';
import { type Command, MARKDOWN_REPORT_OPTION, JSON_REPORT_OPTION } from './command.js';

function parseRuntimes(text: string): LlmRuntime[] {
  return text.split(',').map((name) => {
    if (!(LLM_RUNTIMES as readonly string[]).includes(name)) {
      throw new EtnaError('INVALID_INPUT', `--runtimes takes names from ${LLM_RUNTIMES.join(', ')}, got '${name}'`);
    }
    return name as LlmRuntime;
  });
}

export const BENCH_LLM: Command = {
  spec: {
    name: 'bench llm',
    brief: 'compare etna, llama.cpp and onnxruntime on one Llama at a real size',
    summary:
      'Writes the llama-8da4w example at a preset size three ways from the same seeded weights ' +
      '(.pte 8da4w, GGUF Q4_0, ONNX MatMulNBits),\n' +
      'then times load, prefill and decode in each runtime, with resident memory and decode bandwidth against the measured read bandwidth.',
    options: [
      { name: 'preset', value: 'NAME', help: `model size: ${LLAMA_8DA4W_PRESET_NAMES.join(', ')} (default stories110m)` },
      { name: 'threads', value: 'N,N...', help: 'thread counts to run each runtime at (default 1,2)' },
      { name: 'runtimes', value: 'NAME,...', help: `runtimes to run (default: those of ${LLM_RUNTIMES.join(', ')} that are installed)` },
      { name: 'decode-steps', value: 'N', help: 'timed decode steps (default 64)' },
      { name: 'repeats', value: 'N', help: 'timed runs of each prefill length (default 5)' },
      { name: 'cache', value: 'DIR', help: 'folder for the written model files (default bench/cache/llm)' },
      JSON_REPORT_OPTION,
      MARKDOWN_REPORT_OPTION,
    ],
  },
  run: async (args) => {
    const runtimes = args.string('runtimes');
    const report = await runLlmBench({
      preset: args.string('preset') ?? 'stories110m',
      threads: args.integerList('threads', [1, 2], 1),
      ...(runtimes !== undefined && { runtimes: parseRuntimes(runtimes) }),
      decodeSteps: args.integer('decode-steps', 64, 1),
      prefillRepeats: args.integer('repeats', 5, 1),
      ...(args.string('cache') !== undefined && { cacheDir: args.string('cache') }),
      log: (line) => process.stderr.write(`${line}\n`),
    });
    console.log(formatLlmReport(report));
    const json = args.string('json');
    if (json !== undefined) {
      writeFileSync(json, `${JSON.stringify({ ...report, rows: report.rows.map(({ checkLogProbs: _, ...row }) => row) }, null, 2)}\n`);
    }
    const md = args.string('md');
    if (md !== undefined) writeFileSync(md, `${formatLlmMarkdown(report)}\n`);
    return 0;
  },
};
