#!/usr/bin/env node
// The `etna` command line. Exit status: 0 success, 1 failure (one line
// `etna COMMAND: CODE: message`), 2 bad usage (the command's usage).
import { BENCH } from './bench.js';
import { BENCH_CHAT } from './bench-chat.js';
import { BENCH_LLM } from './bench-llm.js';
import { BENCH_ZOO } from './bench-zoo.js';
import { CHAT } from './chat.js';
import { commandLine, parseCommand, reportFailure, reportUsageError, usage, UsageError, type Command } from './command.js';
import { DEMO } from './demo.js';
import { EXPORT_EXAMPLE } from './export-example.js';
import { GENERATE } from './generate.js';
import { IMPORT_ONNX } from './import-onnx.js';
import { INSPECT } from './inspect.js';
import { RUN } from './run.js';
import { SERVE } from './serve.js';

const COMMANDS: readonly Command[] = [
  INSPECT,
  RUN,
  GENERATE,
  CHAT,
  SERVE,
  IMPORT_ONNX,
  EXPORT_EXAMPLE,
  DEMO,
  BENCH,
  BENCH_LLM,
  BENCH_CHAT,
  BENCH_ZOO,
];

function overview(): string {
  const width = Math.max(...COMMANDS.map(({ spec }) => commandLine(spec).length));
  const lines = ['usage: etna <command> [options]', '', 'commands:'];
  for (const { spec } of COMMANDS) {
    lines.push(`  ${commandLine(spec).padEnd(width)}  ${spec.brief}`);
  }
  lines.push('', "Run 'etna <command> --help' for a command's options. docs/cli.md has the details.");
  return lines.join('\n');
}

async function main(argv: readonly string[]): Promise<number> {
  // `etna bench llm`, `etna bench chat` and `etna bench zoo` are commands of their own, with their own options.
  const [name, ...rest] =
    argv[0] === 'bench' && ['llm', 'chat', 'zoo'].includes(argv[1] ?? '') ? [`bench ${argv[1]}`, ...argv.slice(2)] : argv;
  if (name === '--help' || name === '-h' || name === 'help') {
    console.log(overview());
    return 0;
  }
  const command = COMMANDS.find(({ spec }) => spec.name === name);
  if (command === undefined) {
    return reportUsageError(undefined, `${name === undefined ? 'no command given' : `unknown command '${name}'`}\n\n${overview()}`);
  }
  let json = false;
  try {
    const args = parseCommand(command.spec, rest);
    if (args === null) {
      console.log(usage(command.spec));
      return 0;
    }
    json = args.flag('json');
    return await command.run(args);
  } catch (error) {
    if (error instanceof UsageError) return reportUsageError(command.spec, error.message);
    return reportFailure(command.spec.name, error, json);
  }
}

// A throw that escapes a command's promise chain still ends in one line.
const lastResort = (error: unknown): void => {
  process.exitCode = reportFailure(process.argv[2] ?? '', error, false);
  process.exit();
};
process.on('uncaughtException', lastResort);
process.on('unhandledRejection', lastResort);

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
