// Where the real .pte files live: test/fixtures/pte in this repository (see
// its README for provenance), or $ETNA_TESTDATA. A missing file fails the test
// that asked for it, naming the path; nothing is skipped.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const testdataDir = process.env.ETNA_TESTDATA ?? path.resolve(repoRoot, 'test/fixtures/pte');

export function testdataPath(name: string): string {
  const file = path.join(testdataDir, name);
  if (!fs.existsSync(file)) throw new Error(`test fixture not found: ${file}`);
  return file;
}

export function testdataFiles(): string[] {
  if (!fs.existsSync(testdataDir)) throw new Error(`test fixture folder not found: ${testdataDir}`);
  return fs
    .readdirSync(testdataDir)
    .filter((name) => name.endsWith('.pte'))
    .sort();
}
