// Shared helpers of the leak and growth checks: RSS after a full GC, and the
// pass/fail rule (growth after warm-up within a tolerance).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const testdataDir = process.env.ETNA_TESTDATA ?? path.resolve(repoRoot, 'test/fixtures/pte');

export async function importEtna() {
  const dist = path.join(repoRoot, 'dist/index.js');
  if (!fs.existsSync(dist)) throw new Error('dist/index.js is missing: run npm run build first');
  const etna = await import(pathToFileURL(dist).href);
  const exporting = await import(pathToFileURL(path.join(repoRoot, 'dist/export/index.js')).href);
  const examples = await import(pathToFileURL(path.join(repoRoot, 'dist/tools/examples/index.js')).href);
  return { ...etna, ...exporting, ...examples };
}

export function requireGc() {
  if (typeof globalThis.gc !== 'function') {
    console.error('run with node --expose-gc');
    process.exit(2);
  }
}

/** RSS in bytes after two full collections and a turn of the event loop. */
export async function settledRss() {
  for (let i = 0; i < 2; i++) {
    globalThis.gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return process.memoryUsage().rss;
}

export function mib(bytes) {
  return (bytes / (1024 * 1024)).toFixed(2);
}

/**
 * Prints the figures and returns whether RSS stayed within `tolerance`
 * (a fraction) of the post-warm-up baseline.
 */
export function verdict(label, baseline, samples, final, tolerance) {
  const peak = Math.max(final, ...samples);
  const growth = (final - baseline) / baseline;
  const peakGrowth = (peak - baseline) / baseline;
  const ok = growth <= tolerance && peakGrowth <= tolerance;
  const usage = process.memoryUsage();
  console.log(
    `${label}: now V8 heap ${mib(usage.heapUsed)} used / ${mib(usage.heapTotal)} reserved MiB, external ${mib(usage.external)} MiB`,
  );
  console.log(
    `${label}: baseline ${mib(baseline)} MiB, final ${mib(final)} MiB (${(growth * 100).toFixed(2)}%), ` +
      `peak ${mib(peak)} MiB (${(peakGrowth * 100).toFixed(2)}%), limit ${(tolerance * 100).toFixed(0)}% -> ${ok ? 'ok' : 'GROWTH'}`,
  );
  return ok;
}
