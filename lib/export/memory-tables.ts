// Markdown tables of the example programs' memory plans, as pasted into
// docs/memory-planning.md. Run the compiled file to print them:
//   node dist/export/memory-tables.js
import { pathToFileURL } from 'node:url';

import { buildExample, EXAMPLE_NAMES } from './examples/index.js';
import { formatMemoryReport, memoryReport } from './planner.js';

export function exampleMemoryTables(): string {
  return EXAMPLE_NAMES.map((name) => formatMemoryReport(name, memoryReport(buildExample(name).plan()))).join('\n\n');
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(entry).href) {
  console.log(exampleMemoryTables());
}
