// `etna export-example NAME OUT.pte`: writes a built-in example program.
import { writeFileSync } from 'node:fs';

import { EXAMPLE_NAMES, EXAMPLES, exportExample, isExampleName } from '../export/index.js';
import { formatBytes } from './format.js';

export function exportExampleUsage(): string {
  const lines = ['usage: etna export-example NAME OUT.pte', '', 'examples:'];
  for (const name of EXAMPLE_NAMES) {
    const info = EXAMPLES[name];
    lines.push(`  ${name}: ${info.summary}`);
    for (const signature of info.methods) lines.push(`      ${signature}`);
  }
  return lines.join('\n');
}

export function runExportExample(name: string, out: string): number {
  if (!isExampleName(name)) {
    console.error(`etna export-example: unknown example '${name}'\n\n${exportExampleUsage()}`);
    return 2;
  }
  const bytes = exportExample(name);
  writeFileSync(out, bytes);
  console.log(`wrote ${out} (${name}, ${formatBytes(bytes.byteLength)})`);
  return 0;
}
