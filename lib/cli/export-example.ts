// `etna export-example NAME OUT.pte`: writes a built-in example program.
import { writeFileSync } from 'node:fs';

import { EXAMPLE_NAMES, EXAMPLES, exportExample, isExampleName } from '../tools/examples/index.js';
import { reportUsageError, usage, type Command } from './command.js';
import { formatBytes } from './format.js';

function examplesList(): string {
  const lines = ['examples:'];
  for (const name of EXAMPLE_NAMES) {
    const info = EXAMPLES[name];
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
    summary: 'Writes the built-in example NAME as a program with portable kernels.',
    options: [],
    notes: examplesList(),
  },
  run: (args) => runExportExample(args.positionals[0]!, args.positionals[1]!),
};

export function exportExampleUsage(): string {
  return usage(EXPORT_EXAMPLE.spec);
}

export function runExportExample(name: string, out: string): number {
  if (!isExampleName(name)) return reportUsageError(EXPORT_EXAMPLE.spec, `unknown example '${name}'`);
  const bytes = exportExample(name);
  writeFileSync(out, bytes);
  console.log(`wrote ${out} (${name}, ${formatBytes(bytes.byteLength)})`);
  return 0;
}
