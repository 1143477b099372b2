import fs from 'node:fs';
import path from 'node:path';

import { describe, expect, it } from 'vitest';

import { exampleMemoryTables } from '../../lib/tools/memory-tables.js';
import { repoRoot } from '../helpers/testdata.js';

describe('docs/memory-planning.md', () => {
  it('shows the memory tables the planner produces today', () => {
    const text = fs.readFileSync(path.join(repoRoot, 'docs/memory-planning.md'), 'utf8');
    const start = text.indexOf('<!-- memory-tables:start -->\n');
    const end = text.indexOf('<!-- memory-tables:end -->');
    expect(start, 'the tables are delimited by memory-tables markers').toBeGreaterThanOrEqual(0);
    const pasted = text.slice(start + '<!-- memory-tables:start -->\n'.length, end).trim();
    expect(pasted, 'regenerate with exampleMemoryTables() from dist/tools/memory-tables.js').toBe(exampleMemoryTables());
  });
});
