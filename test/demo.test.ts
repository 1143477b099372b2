// `etna demo` runs kv-decoder generation in child processes; `etna
// export-example` writes the examples as loadable programs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { prepareArtifacts, runInChild, withTemporaryDirectory, type BenchConfig } from '../lib/tools/bench.js';
import { formatDemoTable } from '../lib/cli/demo.js';
import { exportExampleUsage, runExportExample } from '../lib/cli/export-example.js';
import { EXAMPLE_NAMES, EXAMPLES } from '../lib/tools/examples/index.js';
import { Program } from '../lib/index.js';

describe('etna demo', () => {
  it('generates greedily: shared memory follows the reference in less memory, unshared loses the cache as documented', async () => {
    const results = await withTemporaryDirectory(async (dir) => {
      const artifacts = prepareArtifacts('kv-decoder', dir);
      const run = (config: BenchConfig) =>
        runInChild({ program: 'kv-decoder', config, threads: 1, iterations: 0, warmup: 0, session: 'generate', decodeSteps: 6, artifacts });
      return [await run('etna-shared'), await run('etna-unshared'), await run('onnxruntime')];
    });
    const [shared, unshared, onnxruntime] = results as [(typeof results)[0], (typeof results)[0], (typeof results)[0]];
    expect(onnxruntime.outputsMatch).toBe(true);
    expect(shared.outputsMatch).toBe(true);
    expect(shared.maxError).toBeLessThan(1e-4);
    expect(unshared.outputsMatch).toBe(false);
    expect(unshared.stateful).toBe(true);
    expect(shared.plannedBytes!).toBeLessThan(unshared.plannedBytes!);
    // Unshared keeps three 2 MiB KV caches and three activation arenas (5 MiB more
    // planned), well above the ~1.5 MiB run-to-run noise of a node process's peak;
    // onnxruntime holds a copy of the weights per session.
    expect(shared.peakRssBytes).toBeLessThan(unshared.peakRssBytes);
    expect(unshared.peakRssBytes).toBeLessThan(onnxruntime.peakRssBytes);
    expect(Object.keys(shared.sessionLatency).sort()).toEqual(['decode', 'prefill', 'reset']);
    const text = formatDemoTable(results);
    expect(text).toMatch(/outputs match reference\s+yes \(max error/);
    expect(text).toContain('no: state not shared (expected)');
    expect(text).toMatch(/per-token decode p50/);
  }, 60_000);
});

describe('etna export-example', () => {
  it('help lists every example with its method signatures', () => {
    const usage = exportExampleUsage();
    for (const name of EXAMPLE_NAMES) {
      expect(usage).toContain(name);
      for (const signature of EXAMPLES[name].methods) expect(usage).toContain(signature);
    }
  });

  it('writes a program that loads with the example methods, and refuses unknown names', () => {
    const dir = mkdtempSync(join(tmpdir(), 'etna-export-example-'));
    try {
      const out = join(dir, 'gru.pte');
      expect(runExportExample('gru-stream', out)).toBe(0);
      expect(Program.load(out).methodNames.sort()).toEqual(['reset', 'step']);
      expect(runExportExample('no-such-example', join(dir, 'x.pte'))).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
