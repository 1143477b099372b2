// `etna export-example NAME OUT.pte [--xnnpack]`: writes a built-in example program.
import { writeFileSync } from 'node:fs';

import { ALL_EXAMPLE_NAMES, exampleInfo, exportExample, isAnyExampleName } from '../tools/examples/index.js';
import { reportUsageError, usage, type Command } from './command.js';
import { formatBytes } from './format.js';

function examplesList(): string {
  const lines = ['examples:'];
  for (const name of ALL_EXAMPLE_NAMES) {
    const info = exampleInfo(name);
    lines.push(`  ${name}: ${info.summary}`);
    for (const signature of info.methods) lines.push(`      ${signature}`);
  }
  return lines.join('\n');
}

export const EXPORT_EXAMPLE: Command = {
  spec: {
    name: 'export-example',
    synopsis: 'NAME OUT.pte',
    positionals: { min: 2, max: 2 },
    brief: 'write a built-in example program',
    summary: 'Writes the built-in example NAME as a program with portable kernels, or lowered to XNNPACK.',
    options: [{ name: 'xnnpack', help: 'lower linear layers, convolutions and arithmetic to XNNPACK, as etna bench runs it (default: portable kernels only)' }],
    notes: examplesList(),
  },
  run: (args) => runExportExample(args.positionals[0]!, args.positionals[1]!, { xnnpack: args.flag('xnnpack') }),
};

export function exportExampleUsage(): string {
  return usage(EXPORT_EXAMPLE.spec);
}

export interface ExportExampleOptions {
  /** Write the program lowered to XNNPACK. */
  readonly xnnpack?: boolean;
}

export function runExportExample(name: string, out: string, options: ExportExampleOptions = {}): number {
  if (!isAnyExampleName(name)) return reportUsageError(EXPORT_EXAMPLE.spec, `unknown example '${name}'`);
  const xnnpack = options.xnnpack === true || exampleInfo(name).xnnpackOnly === true;
  const bytes = exportExample(name, { xnnpack });
  writeFileSync(out, bytes);
  console.log(`wrote ${out} (${name}${xnnpack ? ', lowered to XNNPACK' : ''}, ${formatBytes(bytes.byteLength)})`);
  return 0;
}
