// `etna demo` runs kv-decoder generation in child processes; `etna
// export-example` writes the examples as loadable programs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { withTemporaryDirectory } from '../../lib/tools/bench/child.js';
import { prepareArtifacts, runInChild } from '../../lib/tools/bench/harness.js';
import type { BenchConfig } from '../../lib/tools/bench/runner.js';
import { formatDemoTable } from '../../lib/cli/demo.js';
import { exportExampleUsage, runExportExample } from '../../lib/cli/export-example.js';
import { ALL_EXAMPLE_NAMES, exampleInfo, exampleReference, KV_DECODER_LARGE_CONFIG } from '../../lib/tools/examples/index.js';
import { Module, Program, Tensor } from '../../lib/index.js';
import { runCli } from '../helpers/cli.js';

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
    // Unshared plans three 2 MiB KV caches instead of one (checked above). Arenas
    // come zeroed by the OS page by page, so a short session makes resident only
    // the cache rows it writes: shared and unshared peaks differ by less than the
    // run-to-run noise of a node process and are not compared. onnxruntime holds
    // a copy of the weights per session, far above that noise.
    expect(shared.peakRssBytes).toBeLessThan(onnxruntime.peakRssBytes);
    expect(unshared.peakRssBytes).toBeLessThan(onnxruntime.peakRssBytes);
    expect(Object.keys(shared.sessionLatency).sort()).toEqual(['decode', 'prefill', 'reset']);
    const text = formatDemoTable(results);
    expect(text).toMatch(/outputs match reference\s+yes \(max error/);
    expect(text).toContain('no: state not shared (expected)');
    expect(text).toMatch(/per-token decode p50/);
  }, 60_000);
});

describe('etna export-example', () => {
  it('help lists every example, the large decoder too, with its method signatures', () => {
    const usage = exportExampleUsage();
    expect(ALL_EXAMPLE_NAMES).toContain('kv-decoder-large');
    for (const name of ALL_EXAMPLE_NAMES) {
      expect(usage).toContain(`  ${name}: `);
      for (const signature of exampleInfo(name).methods) expect(usage).toContain(signature);
    }
    expect(usage).toMatch(/--xnnpack\s+lower/);
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

  it('--xnnpack writes the lowered program; without it every method runs portable kernels', () => {
    const dir = mkdtempSync(join(tmpdir(), 'etna-export-example-'));
    try {
      const portable = join(dir, 'kv.pte');
      const lowered = join(dir, 'kv-xnnpack.pte');
      expect(runCli(['export-example', 'kv-decoder', portable]).status).toBe(0);
      const result = runCli(['export-example', '--xnnpack', 'kv-decoder', lowered]);
      expect(result.status, result.stderr).toBe(0);
      expect(result.stdout).toMatch(/lowered to XNNPACK/);
      const delegatesOf = (file: string) =>
        Program.load(file)
          .describe()
          .methods.flatMap((method) => method.delegates);
      expect(delegatesOf(portable)).toEqual([]);
      expect(delegatesOf(lowered)).toContain('XnnpackBackend');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('kv-decoder-large lowered to XNNPACK loads and prefills as its reference does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'etna-export-example-'));
    try {
      const out = join(dir, 'kv-large.pte');
      expect(runExportExample('kv-decoder-large', out, { xnnpack: true })).toBe(0);
      const module = await Module.load(out, { shareMemoryArenas: true });
      try {
        expect([...module.methodNames].sort()).toEqual(['decode', 'prefill', 'reset']);
        const reference = exampleReference('kv-decoder-large');
        const [reset, prefill] = reference.session();
        for (const call of [reset!, prefill!]) {
          const want = reference.execute(call.method, call.inputs);
          const got = await module.execute(call.method, call.inputs);
          expect(got.length).toBe(want.length);
          for (const [k, expected] of want.entries()) {
            const actual = got[k] as Tensor;
            expect(actual.shape).toEqual([...expected.shape]);
            const values = actual.data as Float32Array;
            const wanted = expected.data as Float32Array;
            let worst = 0;
            for (let i = 0; i < wanted.length; i++) {
              worst = Math.max(worst, Math.abs(values[i]! - wanted[i]!) / Math.max(1, Math.abs(wanted[i]!)));
            }
            expect(worst).toBeLessThan(1e-4);
          }
        }
        const logitsShape = reference.execute(prefill!.method, prefill!.inputs)[0]!.shape;
        expect(logitsShape).toEqual([1, KV_DECODER_LARGE_CONFIG.prefillLength, KV_DECODER_LARGE_CONFIG.vocab]);
      } finally {
        await module.dispose();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
