#!/usr/bin/env node
// The `etna` command line.
import { parseArgs } from 'node:util';

import { runInspect } from './inspect.js';

const USAGE = `usage: etna <command> [options]

commands:
  inspect FILE [--json]   describe a .pte program: methods, inputs, outputs,
                          operators, delegates and memory plan

Run 'etna <command> --help' for a command's options. docs/cli.md has the details.`;

function main(argv: string[]): number {
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

try {
  process.exitCode = main(process.argv.slice(2));
} catch (error) {
  console.error(`etna: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 2;
}
