// `etna export-example NAME OUT.pte [--xnnpack]`: writes a built-in example program.
import { writeFileSync } from 'node:fs';

import { ALL_EXAMPLE_NAMES, exampleInfo, exportExample, isAnyExampleName } from '../tools/examples/index.js';
import { reportUsageError, usage, type Command } from './command.js';
import { formatBytes } from '../format.js';

function examplesList(): string {
  const lines = ['examples:'];
  for (const name of ALL_EXAMPLE_NAMES) {
    const info = exampleInfo(name);
    lines.push(`  ${name}: ${info.summary}`);
    for (const signature of info.methods) lines.push(`      ${signature}`);
    if (info.presets !== undefined) lines.push(`      presets: ${info.presets.join(', ')} (prefill of 1 to 128 tokens, last-position ` +
      `logits)`);
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
    options: [
      {
        name: 'xnnpack',
        help: 'lower linear layers, convolutions and arithmetic to XNNPACK, as etna bench runs it (default: portable kernels only)',
      },
      {
        name: 'preset',
        value: 'NAME',
        help: "write the example at one of its preset sizes, with seeded random weights (see the example's presets below)",
      },
    ],
    notes: examplesList(),
  },
  run: (args) => runExportExample(
    args.positionals[0]!,
    args.positionals[1]!,
    { xnnpack: args.flag('xnnpack'), preset: args.string('preset') },
  ),
};

export function exportExampleUsage(): string {
  return usage(EXPORT_EXAMPLE.spec);
}

export interface ExportExampleOptions {
  /** Write the program lowered to XNNPACK. */
  readonly xnnpack?: boolean;
  /** One of the example's preset sizes. */
  readonly preset?: string;
}

export function runExportExample(name: string, out: string, options: ExportExampleOptions = {}): number {
  if (!isAnyExampleName(name)) return reportUsageError(EXPORT_EXAMPLE.spec, `unknown example '${name}'`);
  const xnnpack = options.xnnpack === true || exampleInfo(name).xnnpackOnly === true;
  const presets = exampleInfo(name).presets ?? [];
  if (options.preset !== undefined && !presets.includes(options.preset)) {
    return reportUsageError(
      EXPORT_EXAMPLE.spec,
      `example '${name}' has no preset '${options.preset}'${presets.length > 0 ? ` (available: ${presets.join(', ')})` : ''}`,
    );
  }
  const bytes = exportExample(name, { xnnpack, ...(options.preset !== undefined && { preset: options.preset }) });
  writeFileSync(out, bytes);
  console.log(`wrote ${out} ` +
    `(${name}${options.preset !== undefined ? ` preset ${options.preset}` : ''}${xnnpack ? ', lowered to XNNPACK' : ''}, ` +
    `${formatBytes(bytes.byteLength)})`);
  return 0;
}
