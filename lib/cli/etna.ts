#!/usr/bin/env node
// The `etna` command line.
import { parseArgs } from 'node:util';

import { BENCH_USAGE, runBench } from './bench.js';
import { DEMO_USAGE, runDemo } from './demo.js';
import { exportExampleUsage, runExportExample } from './export-example.js';
import { runImportOnnx } from './import-onnx.js';
import { runInspect } from './inspect.js';
import { runRun } from './run.js';

const USAGE = `usage: etna <command> [options]

commands:
  inspect FILE [--json]   describe a .pte program: methods, inputs, outputs,
                          operators, delegates and memory plan
  run FILE [options]      run a method (or a sequence of calls) and print outputs
  import-onnx MODEL.onnx -o OUT.pte [options]
                          import an ONNX model, state pairs in shared buffers
  export-example NAME OUT.pte
                          write a built-in example program
  demo [--steps N]        kv-decoder with shared and unshared memory, side by side
  bench [FILES...]        memory and latency: etna shared, unshared, onnxruntime

Run 'etna <command> --help' for a command's options. docs/cli.md has the details.`;

const RUN_USAGE = `usage: etna run FILE [--method NAME] [--inputs IN.json] [--calls CALLS.json]
                [--share true|false|state|auto] [--fill zeros|ones|random] [--seed N]
                [--report] [--json]`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'inspect': {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { json: { type: 'boolean', default: false }, help: { type: 'boolean', default: false } },
      });
      if (values.help || positionals.length !== 1) {
        console.error('usage: etna inspect FILE [--json]');
        return values.help ? 0 : 2;
      }
      return runInspect(positionals[0] as string, values.json === true);
    }
    case 'run': {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: {
          method: { type: 'string' },
          inputs: { type: 'string' },
          calls: { type: 'string' },
          share: { type: 'string' },
          fill: { type: 'string', default: 'random' },
          seed: { type: 'string', default: '1' },
          report: { type: 'boolean', default: false },
          json: { type: 'boolean', default: false },
          help: { type: 'boolean', default: false },
        },
      });
      if (values.help || positionals.length !== 1) {
        console.error(RUN_USAGE);
        return values.help ? 0 : 2;
      }
      return runRun({
        file: positionals[0] as string,
        method: values.method,
        inputs: values.inputs,
        calls: values.calls,
        share: values.share,
        json: values.json === true,
        fill: values.fill as string,
        seed: Number(values.seed),
        report: values.report === true,
      });
    }
    case 'export-example': {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { help: { type: 'boolean', default: false } } });
      if (values.help || positionals.length !== 2) {
        console.error(exportExampleUsage());
        return values.help ? 0 : 2;
      }
      return runExportExample(positionals[0] as string, positionals[1] as string);
    }
    case 'demo': {
      const { values } = parseArgs({
        args: rest,
        options: { steps: { type: 'string', default: '32' }, threads: { type: 'string', default: '1' }, help: { type: 'boolean', default: false } },
      });
      if (values.help) {
        console.error(DEMO_USAGE);
        return 0;
      }
      return runDemo({ steps: Number(values.steps), threads: Number(values.threads) });
    }
    case 'bench': {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: {
          quick: { type: 'boolean', default: false },
          threads: { type: 'string', default: '1' },
          iterations: { type: 'string' },
          json: { type: 'string' },
          md: { type: 'string' },
          svg: { type: 'string' },
          help: { type: 'boolean', default: false },
        },
      });
      if (values.help) {
        console.error(BENCH_USAGE);
        return 0;
      }
      return runBench({
        files: positionals,
        quick: values.quick === true,
        threads: Number(values.threads),
        iterations: values.iterations === undefined ? undefined : Number(values.iterations),
        json: values.json,
        md: values.md,
        svg: values.svg,
      });
    }
    case 'import-onnx':
      return runImportOnnx(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      console.error(`etna: unknown command '${command}'\n\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`etna: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 2;
  },
);
