#!/usr/bin/env node
// The `etna` command line.
import { parseArgs } from 'node:util';

import { runInspect } from './inspect.js';
import { runRun } from './run.js';

const USAGE = `usage: etna <command> [options]

commands:
  inspect FILE [--json]   describe a .pte program: methods, inputs, outputs,
                          operators, delegates and memory plan
  run FILE [options]      run a method (or a sequence of calls) and print outputs

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
