// Where the real .pte files live (../shared/testdata/pte beside the checkout,
// or $ETNA_TESTDATA). Suites that need them skip, saying so, when absent.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe } from 'vitest';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const testdataDir = process.env.ETNA_TESTDATA ?? path.resolve(repoRoot, '../shared/testdata/pte');
export const haveTestdata = fs.existsSync(path.join(testdataDir, 'et_add.pte'));

if (!haveTestdata) console.warn(`real .pte files not found at ${testdataDir}: suites that read them are skipped`);

export const describeWithTestdata = haveTestdata ? describe : describe.skip;

export function testdataPath(name: string): string {
  return path.join(testdataDir, name);
}

export function testdataFiles(): string[] {
  if (!haveTestdata) return [];
  return fs.readdirSync(testdataDir).filter((name) => name.endsWith('.pte')).sort();
}
