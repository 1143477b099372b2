// Markdown tables of the example programs' memory plans, as pasted into
// docs/memory-planning.md (a test compares them). Print them with
//   node -e "import('./dist/tools/memory-tables.js').then((m) => console.log(m.exampleMemoryTables()))"
import { buildExample, EXAMPLE_NAMES } from './examples/index.js';
import { formatMemoryReport, memoryReport } from '../export/planner.js';

export function exampleMemoryTables(): string {
  return EXAMPLE_NAMES.map((name) => formatMemoryReport(name, memoryReport(buildExample(name).plan()))).join('\n\n');
}
