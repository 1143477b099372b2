// The benchmark harness: each configuration in its own child process, a JSON
// report of the documented shape, and an SVG with one bar group per configuration.
import { describe, expect, it } from 'vitest';

import { parseSessionCounts } from '../../lib/cli/bench.js';
import { compareMethods, runBenchmarks, type BenchReport } from '../../lib/tools/bench/harness.js';
import {
  formatJson,
  formatMarkdown,
  formatSessionsTable,
  formatSvg,
  programResults,
  sessionsResults,
} from '../../lib/tools/bench/report.js';
import { CONFIGS, percentile } from '../../lib/tools/bench/runner.js';
import { SESSION_COUNTS, sessionDecodeSteps, sessionsRuns, type SessionsResult } from '../../lib/tools/bench/sessions.js';

/** Well-formedness: every tag closes in order and attribute values are quoted. */
function checkXml(text: string): void {
  const stack: string[] = [];
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>|<\?[^>]*\?>|<!--[\s\S]*?-->/g;
  let last = 0;
  for (let match = tag.exec(text); match !== null; match = tag.exec(text)) {
    expect(text.slice(last, match.index), 'stray markup between tags').not.toMatch(/[<>]/);
    last = tag.lastIndex;
    const [, closing, name, , selfClosing] = match;
    if (name === undefined) continue;
    if (closing === '/') expect(stack.pop(), `closing </${name}>`).toBe(name);
    else if (selfClosing !== '/') stack.push(name);
  }
  expect(text.slice(last).trim()).toBe('');
  expect(stack).toEqual([]);
}

describe('etna bench', () => {
  let report: BenchReport;

  it('runs gru-stream in three child processes and reports every figure', async () => {
    report = await runBenchmarks({
      files: [],
      examples: ['gru-stream'],
      quick: true,
      threads: 1,
      iterations: 5,
      warmup: 1,
      progress: false,
    });
    const json = JSON.parse(formatJson(report)) as BenchReport;
    expect(json.threads).toBe(1);
    expect(json.node).toBe(process.version);
    expect(typeof json.cpu).toBe('string');
    expect(json.results.map((r) => r.config)).toEqual([...CONFIGS]);
    for (const r of json.results) {
      expect(r.program).toBe('gru-stream');
      expect(r.peakRssBytes).toBeGreaterThanOrEqual(r.steadyRssBytes);
      expect(r.steadyRssBytes).toBeGreaterThan(10 * 1024 * 1024);
      expect(r.loadMs).toBeGreaterThan(0);
      expect(Object.keys(r.latency).sort()).toEqual(['reset', 'step']);
      for (const figures of Object.values(r.latency)) expect(figures.p95Ms).toBeGreaterThanOrEqual(figures.p50Ms);
      expect(typeof r.outputsMatch).toBe('boolean');
      if (r.config === 'onnxruntime') {
        expect(r.plannedBytes).toBeNull();
        expect(r.packedWeightBytes).toBeNull();
      } else {
        expect(r.plannedBytes).toBeGreaterThan(0);
        expect(typeof r.packedWeightBytes).toBe('number');
      }
    }
    const byConfig = Object.fromEntries(json.results.map((r) => [r.config, r]));
    // Shared state carries the GRU's hidden state across calls; unshared arenas cannot.
    expect(byConfig['etna-shared']!.outputsMatch).toBe(true);
    expect(byConfig['onnxruntime']!.outputsMatch).toBe(true);
    expect(byConfig['etna-unshared']!.outputsMatch).toBe(false);
    expect(byConfig['etna-shared']!.plannedBytes!).toBeLessThan(byConfig['etna-unshared']!.plannedBytes!);
  }, 120_000);

  it('draws valid SVG with one bar group per configuration', () => {
    const svg = formatSvg(report);
    checkXml(svg);
    const groups = [...svg.matchAll(/<g class="bar-group" data-program="([^"]+)" data-config="([^"]+)">/g)].map((m) => m[2]);
    expect(groups).toEqual([...CONFIGS]);
  });

  it('writes a Markdown table with a row per configuration', () => {
    const lines = formatMarkdown(report)
      .split('\n')
      .filter((l) => l.startsWith('| gru-stream'));
    expect(lines).toHaveLength(3);
    expect(lines.find((l) => l.includes('etna-unshared'))).toContain('state not shared (expected)');
  });

  it('runs Silero VAD imported from ONNX against the original file and the folded graph on onnxruntime', async () => {
    const silero = await runBenchmarks({
      files: [],
      examples: ['silero-vad'],
      quick: true,
      threads: 1,
      iterations: 5,
      warmup: 1,
      progress: false,
    });
    expect(silero.results.map((r) => r.config)).toEqual(['etna-shared', 'etna-unshared', 'onnxruntime', 'onnxruntime-folded']);
    for (const r of silero.results) {
      // Each configuration's 250 streamed probabilities agree with etna-shared's.
      expect(r.outputsMatch, `${r.config} max error ${r.maxError}`).toBe(true);
      expect(Object.keys(r.sessionLatency).sort()).toEqual(['reset', 'step']);
      expect(r.sessionLatency['step']!.p95Ms).toBeGreaterThanOrEqual(r.sessionLatency['step']!.p50Ms);
    }
    const shared = silero.results.find((r) => r.config === 'etna-shared')!;
    expect(shared.stateful).toBe(true);
    expect(shared.packedWeightBytes).toBeGreaterThan(0);
    const groups = [...formatSvg(silero).matchAll(/data-config="([^"]+)"/g)].map((m) => m[1]);
    expect(groups).toEqual(['etna-shared', 'etna-unshared', 'onnxruntime', 'onnxruntime-folded']);
  }, 120_000);

  it('the sessions entry: a row per runtime and stream count, with the fields of the other rows', async () => {
    const report = await runBenchmarks({ files: [], examples: [], quick: true, threads: 1, sessions: [1, 3], progress: false });
    const json = JSON.parse(formatJson(report)) as BenchReport;
    expect(programResults(json)).toEqual([]);
    const rows = json.results as SessionsResult[];
    expect(rows.map((r) => [r.config, r.sessions])).toEqual([
      ['etna-sessions', 1],
      ['etna-sessions', 3],
      ['onnxruntime-sessions', 1],
      ['onnxruntime-sessions', 3],
    ]);
    for (const r of rows) {
      expect(r.program).toBe('kv-decoder-large');
      expect(r.decodeSteps).toBe(sessionDecodeSteps(true));
      expect(r.threads).toBe(1);
      // One thread per session: etna starts no pool worker, only the call thread that runs the calls, one at a time.
      if (r.config === 'etna-sessions') expect(r.addedThreads).toBe(1);
      // Every stream's logits match the reference: no session sees another's state.
      expect(r.outputsMatch, `${r.config} x${r.sessions} max error ${r.maxError}`).toBe(true);
      expect(r.stateful).toBe(true);
      expect(r.steadyRssBytes).toBeGreaterThan(r.baselineRssBytes);
      expect(r.peakRssBytes).toBeGreaterThanOrEqual(r.steadyRssBytes);
      expect(r.loadMs).toBeGreaterThan(0);
      expect(r.latency).toEqual({});
      expect(Object.keys(r.sessionLatency).sort()).toEqual(['decode', 'prefill', 'reset']);
      for (const figures of Object.values(r.sessionLatency)) expect(figures.p95Ms).toBeGreaterThanOrEqual(figures.p50Ms);
      if (r.config === 'etna-sessions') {
        expect(r.plannedBytes).toBeGreaterThan(0);
        expect(r.packedWeightBytes).toBeGreaterThan(0);
      } else {
        expect(r.plannedBytes).toBeNull();
        expect(r.packedWeightBytes).toBeNull();
      }
    }
    // Each etna module plans its own arenas: three modules plan three times one.
    expect(rows[1]!.plannedBytes).toBe(3 * rows[0]!.plannedBytes!);
    const text = formatSessionsTable(sessionsResults(json));
    expect(text.split('\n')[0]).toMatch(/^program\s+config\s+sessions\s+RSS MiB.*decode p50 ms\s+outputs match$/);
    expect(text.split('\n').filter((line) => line.startsWith('kv-decoder-large'))).toHaveLength(4);
    expect(formatMarkdown(json)).not.toContain('sessions');
  }, 240_000);

  it('the default counts add a row of 64 sessions at 2 threads; counts asked for run as asked', () => {
    expect(sessionsRuns(SESSION_COUNTS, 1)).toEqual([
      { sessions: 1, threads: 1 },
      { sessions: 16, threads: 1 },
      { sessions: 64, threads: 1 },
      { sessions: 64, threads: 2 },
    ]);
    expect(sessionsRuns(SESSION_COUNTS, 2).map((run) => run.threads)).toEqual([2, 2, 2]);
    expect(sessionsRuns([1, 3], 1)).toEqual([
      { sessions: 1, threads: 1 },
      { sessions: 3, threads: 1 },
    ]);
  });

  it('--sessions takes stream counts, or 0 to leave the entry out', () => {
    expect(parseSessionCounts(undefined)).toBeUndefined();
    expect(parseSessionCounts('0')).toEqual([]);
    expect(parseSessionCounts('1, 16,64')).toEqual([1, 16, 64]);
    for (const bad of ['', '16,', 'two', '0,4', '-1', '257', '1.5']) {
      expect(() => parseSessionCounts(bad), bad).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    }
  });

  it('times each example method beside onnxruntime in one process, with outputs that agree', async () => {
    const rows = await compareMethods('kv-decoder', { iterations: 3, warmup: 1, threads: 1 });
    expect(rows.map((r) => r.method)).toEqual(['reset', 'prefill', 'decode']);
    for (const row of rows) {
      expect(row.program).toBe('kv-decoder');
      expect(row.relativeError).toBeLessThan(1e-4);
      for (const ms of [row.etnaP50Ms, row.onnxruntimeP50Ms, row.etnaMinMs, row.onnxruntimeMinMs]) expect(ms).toBeGreaterThan(0);
      expect(row.ratio).toBeCloseTo(row.etnaP50Ms / row.onnxruntimeP50Ms, 10);
    }
    await expect(compareMethods('llama-8da4w', { iterations: 1, warmup: 0, threads: 1 })).rejects.toThrow(/no ONNX form/);
  });

  it('percentiles pick the nearest rank', () => {
    const sorted = Array.from({ length: 20 }, (_, i) => i + 1);
    expect(percentile(sorted, 0.5)).toBe(10);
    expect(percentile(sorted, 0.95)).toBe(19);
    expect(percentile([3], 0.95)).toBe(3);
  });
});
