// `etna bench --threads 1,2`: the thread list is parsed in one place for both
// bench commands, the report sets each workload's etna and onnxruntime figures
// at every count side by side (checked on made-up timings, so nothing here
// depends on how fast the machine is), and a real run carries both counts
// through to the JSON it writes.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';

import { BENCH } from '../../lib/cli/bench.js';
import { BENCH_LLM } from '../../lib/cli/bench-llm.js';
import { parseCommand, type ParsedArgs } from '../../lib/cli/command.js';
import { EtnaError } from '../../lib/errors.js';
import type { BenchReport } from '../../lib/tools/bench/harness.js';
import { formatConsoleTable, formatJson, formatMarkdown, formatSvg } from '../../lib/tools/bench/report.js';
import type { BenchConfig, BenchResult } from '../../lib/tools/bench/runner.js';
import type { SessionsResult } from '../../lib/tools/bench/sessions.js';
import {
  formatThreadScaling,
  goalLines,
  threadScaling,
  threadScalingRows,
  type ThreadScalingRow,
} from '../../lib/tools/bench/thread-scaling.js';

function parsed(command: typeof BENCH, argv: string[]): ParsedArgs {
  const args = parseCommand(command.spec, argv);
  if (args === null) throw new Error('--help');
  return args;
}

describe('--threads as a list', () => {
  it('takes one count or several, in the order given; absent, the command default', () => {
    expect(parsed(BENCH, []).integerList('threads', [1], 1)).toEqual([1]);
    expect(parsed(BENCH, ['--threads', '2']).integerList('threads', [1], 1)).toEqual([2]);
    expect(parsed(BENCH, ['--threads', '1,2']).integerList('threads', [1], 1)).toEqual([1, 2]);
    expect(parsed(BENCH, ['--threads', '4, 1 ,2']).integerList('threads', [1], 1)).toEqual([4, 1, 2]);
  });

  it('refuses 0, empty items, repeats and words with an INVALID_INPUT naming the flag, in both bench commands', async () => {
    for (const bad of ['0', '1,,2', 'x', '', '1,', ',2', '-1', '1.5', '1e1', '2,2', '1;2', '0x2']) {
      for (const command of [BENCH, BENCH_LLM]) {
        // Both commands read --threads before they start any work.
        const run = Promise.resolve().then(() => command.run(parsed(command, [`--threads=${bad}`])));
        const error = await run.then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, `${command.spec.name} --threads '${bad}'`).toBeInstanceOf(EtnaError);
        expect((error as EtnaError).code).toBe('INVALID_INPUT');
        expect((error as EtnaError).message).toBe(`--threads takes distinct integers >= 1 separated by commas (like 1,2), got '${bad}'`);
      }
    }
  });
});

// ------------------------------------------------------------------ made-up timings

function row(program: string, config: BenchConfig, threads: number, latency: Record<string, [number, number]>): BenchResult {
  return {
    program,
    config,
    threads,
    plannedBytes: config.startsWith('etna') ? 4096 : null,
    peakRssBytes: 80 * 1024 * 1024,
    steadyRssBytes: 70 * 1024 * 1024,
    baselineRssBytes: 40 * 1024 * 1024,
    packedWeightBytes: config.startsWith('etna') ? 1024 : null,
    loadMs: 12,
    latency: Object.fromEntries(Object.entries(latency).map(([method, [p50Ms, p95Ms]]) => [method, { p50Ms, p95Ms }])),
    outputsMatch: true,
    maxError: 0,
    stateful: false,
    sessionLatency: {},
  };
}

const SESSIONS_ROW: SessionsResult = {
  ...row('kv-decoder-large', 'etna-shared', 1, {}),
  config: 'etna-sessions',
  sessions: 1,
  decodeSteps: 2,
  addedThreads: 0,
  latency: {},
};

/**
 * dbnet-det meets every goal; svtr-rec misses them all; kv-decoder-large has
 * prefill (a speed-up goal) and decode (none); llama-8da4w runs on etna only.
 */
function twoCountReport(): BenchReport {
  return {
    results: [
      row('dbnet-det', 'etna-shared', 1, { forward: [8, 9] }),
      row('dbnet-det', 'etna-unshared', 1, { forward: [80, 90] }),
      row('dbnet-det', 'onnxruntime', 1, { forward: [10, 11] }),
      row('dbnet-det', 'onnxruntime-folded', 1, { forward: [70, 71] }),
      row('dbnet-det', 'etna-shared', 2, { forward: [4, 6] }),
      row('dbnet-det', 'etna-unshared', 2, { forward: [40, 90] }),
      row('dbnet-det', 'onnxruntime', 2, { forward: [5, 6] }),
      row('dbnet-det', 'onnxruntime-folded', 2, { forward: [60, 61] }),
      row('svtr-rec', 'etna-shared', 1, { forward: [1, 1.2] }),
      row('svtr-rec', 'onnxruntime', 1, { forward: [0.9, 1] }),
      row('svtr-rec', 'etna-shared', 2, { forward: [0.8, 3.2] }),
      row('svtr-rec', 'onnxruntime', 2, { forward: [0.5, 0.6] }),
      row('kv-decoder-large', 'etna-shared', 1, { reset: [0.01, 0.02], prefill: [2, 2.5], decode: [0.5, 0.6] }),
      row('kv-decoder-large', 'onnxruntime', 1, { reset: [0.02, 0.03], prefill: [3, 3.5], decode: [0.4, 0.5] }),
      row('kv-decoder-large', 'etna-shared', 2, { reset: [0.01, 0.02], prefill: [1.2, 2], decode: [0.5, 0.7] }),
      row('kv-decoder-large', 'onnxruntime', 2, { reset: [0.02, 0.03], prefill: [2, 2.4], decode: [0.25, 0.3] }),
      row('llama-8da4w', 'etna-shared', 1, { forward: [30, 33] }),
      row('llama-8da4w', 'etna-shared', 2, { forward: [20, 50] }),
      SESSIONS_ROW,
    ],
    threads: 1,
    threadCounts: [1, 2],
    node: 'v22.0.0',
    cpu: 'test cpu (2 cores)',
  };
}

function oneCountReport(): BenchReport {
  return {
    results: [row('dbnet-det', 'etna-shared', 2, { forward: [4, 6] }), row('dbnet-det', 'onnxruntime', 2, { forward: [5, 6] })],
    threads: 2,
    threadCounts: [2],
    node: 'v22.0.0',
    cpu: 'test cpu (2 cores)',
  };
}

function byWorkload(rows: readonly ThreadScalingRow[], workload: string): ThreadScalingRow {
  const found = rows.find((r) => `${r.program} ${r.method}` === workload);
  if (found === undefined) throw new Error(`no row for ${workload}`);
  return found;
}

describe('the thread-count table', () => {
  it('has a row per workload with etna-shared and onnxruntime at each count, their ratio and the speed-ups', () => {
    const rows = threadScaling(twoCountReport());
    expect(rows.map((r) => `${r.program} ${r.method}`)).toEqual([
      'dbnet-det forward',
      'svtr-rec forward',
      'kv-decoder-large reset',
      'kv-decoder-large prefill',
      'kv-decoder-large decode',
      'llama-8da4w forward',
    ]);
    const dbnet = byWorkload(rows, 'dbnet-det forward');
    // etna-unshared and onnxruntime-folded do not enter it.
    expect(dbnet.byThreads).toEqual([
      { threads: 1, etna: { p50Ms: 8, p95Ms: 9 }, onnxruntime: { p50Ms: 10, p95Ms: 11 }, ratio: 0.8 },
      { threads: 2, etna: { p50Ms: 4, p95Ms: 6 }, onnxruntime: { p50Ms: 5, p95Ms: 6 }, ratio: 0.8 },
    ]);
    expect(dbnet.speedUps).toEqual([{ from: 1, to: 2, etna: 2, onnxruntime: 2 }]);
    const llama = byWorkload(rows, 'llama-8da4w forward');
    expect(llama.byThreads.map((f) => [f.onnxruntime, f.ratio])).toEqual([
      [null, null],
      [null, null],
    ]);
    expect(llama.speedUps).toEqual([{ from: 1, to: 2, etna: 1.5, onnxruntime: null }]);
  });

  it('checks the 2-thread goals where they apply, without failing', () => {
    const rows = threadScaling(twoCountReport());
    const goals = (workload: string): [string, number, number, boolean][] =>
      byWorkload(rows, workload).goals.map((g) => [g.goal, g.value, g.limit, g.met]);
    expect(goals('dbnet-det forward')).toEqual([
      ['tail', 1.5, 2, true],
      ['speed-up', 0.5, 0.75, true],
      ['vs-onnxruntime', 0.8, 1, true],
    ]);
    expect(goals('svtr-rec forward')).toEqual([
      ['tail', 4, 2, false],
      ['speed-up', 0.8, 0.75, false],
      ['vs-onnxruntime', 1.6, 1, false],
    ]);
    // The speed-up goal is prefill's, not decode's.
    expect(goals('kv-decoder-large prefill').map(([goal]) => goal)).toEqual(['tail', 'speed-up', 'vs-onnxruntime']);
    expect(goals('kv-decoder-large decode').map(([goal]) => goal)).toEqual(['tail', 'vs-onnxruntime']);
    // Without onnxruntime only the tail applies.
    expect(goals('llama-8da4w forward')).toEqual([['tail', 2.5, 2, false]]);
    // Without a 2-thread run no goal applies.
    expect(threadScaling({ ...twoCountReport(), threadCounts: [1, 4] }).every((r) => r.goals.length === 0)).toBe(true);
    // A 2-thread run without a 1-thread one: no speed-up goal.
    const twoAndFour = threadScaling({ ...twoCountReport(), threadCounts: [2, 4] });
    expect(byWorkload(twoAndFour, 'dbnet-det forward').goals.map((g) => g.goal)).toEqual(['tail', 'vs-onnxruntime']);

    const lines = goalLines(rows);
    expect(lines).toHaveLength(rows.length);
    expect(lines[0]).toBe(
      'dbnet-det forward goals: p95/p50 at 2t 1.50x (≤ 2x) met; p50 2t/1t 0.50x (≤ 0.75x) met; etna/ort at 2t 0.80x (≤ 1x) met',
    );
    expect(lines[1]).toBe(
      'svtr-rec forward goals: p95/p50 at 2t 4.00x (≤ 2x) missed; p50 2t/1t 0.80x (≤ 0.75x) missed; etna/ort at 2t 1.60x (≤ 1x) missed',
    );
  });

  it('writes p50 / p95 per runtime and count, the ratio per count and a speed-up column per runtime', () => {
    const report = twoCountReport();
    const [header, ...body] = threadScalingRows(threadScaling(report), report.threadCounts);
    expect(header).toEqual([
      'program',
      'method',
      'etna 1t p50/p95 ms',
      'ort 1t p50/p95 ms',
      'etna/ort 1t',
      'etna 2t p50/p95 ms',
      'ort 2t p50/p95 ms',
      'etna/ort 2t',
      'etna 1→2',
      'ort 1→2',
    ]);
    expect(body[0]).toEqual([
      'dbnet-det',
      'forward',
      '8.00 / 9.00',
      '10.00 / 11.00',
      '0.80x',
      '4.00 / 6.00',
      '5.00 / 6.00',
      '0.80x',
      '2.00x',
      '2.00x',
    ]);
    expect(body.at(-1)).toEqual(['llama-8da4w', 'forward', '30.00 / 33.00', '-', '-', '20.00 / 50.00', '-', '-', '1.50x', '-']);
    // Three counts: a speed-up pair from the first count to each later one.
    const three = threadScalingRows(threadScaling({ ...report, threadCounts: [1, 2, 4] }), [1, 2, 4])[0]!;
    expect(three.slice(-4)).toEqual(['etna 1→2', 'ort 1→2', 'etna 1→4', 'ort 1→4']);
    // A speed-up far below 1 keeps two significant digits.
    const collapsed = twoCountReport();
    collapsed.results[4] = row('dbnet-det', 'etna-shared', 2, { forward: [2000, 2100] });
    expect(threadScalingRows(threadScaling(collapsed), [1, 2])[1]!.slice(-2)).toEqual(['0.0040x', '2.00x']);
  });

  it('with several counts the text, Markdown, JSON and SVG carry each count; with one they stay as they were', () => {
    const report = twoCountReport();
    const text = formatConsoleTable(report).split('\n');
    expect(text[0]).toMatch(/^program\s+config\s+threads\s+planned/);
    expect(text.filter((line) => /^dbnet-det\s+etna-shared\s+2\s/.test(line))).toHaveLength(1);
    const scaling = formatThreadScaling(report);
    expect(scaling.split('\n')[1]).toMatch(/^program\s+method\s+etna 1t p50\/p95 ms\s+ort 1t p50\/p95 ms\s+etna\/ort 1t\s/);
    expect(scaling).toContain('dbnet-det forward goals:');

    const markdown = formatMarkdown(report);
    expect(markdown).toContain('1, 2 threads.');
    expect(markdown).toContain('| program | config | threads | planned |');
    expect(markdown).toContain(
      '| dbnet-det | forward | 8.00 / 9.00 | 10.00 / 11.00 | 0.80x | 4.00 / 6.00 | 5.00 / 6.00 | 0.80x | 2.00x | 2.00x |',
    );
    expect(markdown).toContain('- svtr-rec forward goals: p95/p50 at 2t 4.00x (≤ 2x) missed;');

    const json = JSON.parse(formatJson(report)) as BenchReport & { threadScaling: ThreadScalingRow[] };
    expect(json.threadCounts).toEqual([1, 2]);
    expect(json.threadScaling).toEqual(threadScaling(report));

    const svg = formatSvg(report);
    const panels = [...svg.matchAll(/<text x="20" y="\d+" font-weight="bold">([^<]+)<\/text>/g)].map((m) => m[1]);
    expect(panels).toEqual([
      'dbnet-det, 1 thread',
      'dbnet-det, 2 threads',
      'svtr-rec, 1 thread',
      'svtr-rec, 2 threads',
      'kv-decoder-large, 1 thread',
      'kv-decoder-large, 2 threads',
      'llama-8da4w, 1 thread',
      'llama-8da4w, 2 threads',
    ]);
    const groups = [...svg.matchAll(/data-program="dbnet-det" data-threads="(\d)" data-config="([^"]+)"/g)].map((m) => `${m[2]} ${m[1]}`);
    expect(groups).toEqual([
      'etna-shared 1',
      'etna-unshared 1',
      'onnxruntime 1',
      'onnxruntime-folded 1',
      'etna-shared 2',
      'etna-unshared 2',
      'onnxruntime 2',
      'onnxruntime-folded 2',
    ]);

    const one = oneCountReport();
    expect(formatConsoleTable(one).split('\n')[0]).toMatch(/^program\s+config\s+planned/);
    expect(formatMarkdown(one)).toContain(', 2 thread(s). Latency after warm-up');
    expect(formatMarkdown(one)).not.toContain('etna 2t');
    expect(JSON.parse(formatJson(one))).not.toHaveProperty('threadScaling');
    expect(formatSvg(one)).not.toContain('data-threads');
    expect(formatSvg(one)).toContain('<g class="bar-group" data-program="dbnet-det" data-config="etna-shared">');
  });
});

// ------------------------------------------------------------------ a real run

describe('etna bench --threads 1,2', () => {
  const dirs: string[] = [];
  afterEach(() => {
    vi.restoreAllMocks();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('runs gru-stream at both counts in one invocation and writes both to the JSON', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'etna-bench-threads-'));
    dirs.push(dir);
    const out = join(dir, 'bench.json');
    const printed: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((...parts: unknown[]) => void printed.push(parts.join(' ')));
    const argv = ['gru-stream', '--threads', '1,2', '--quick', '--iterations', '3', '--sessions', '0', '--json', out];
    const status = await BENCH.run(parsed(BENCH, argv));
    // etna-unshared does not carry the GRU's state (expected), so every row matches where it must.
    expect(status).toBe(0);

    const json = JSON.parse(readFileSync(out, 'utf8')) as BenchReport & { threadScaling: ThreadScalingRow[] };
    expect(json.threadCounts).toEqual([1, 2]);
    expect(json.threads).toBe(1);
    const runs = (json.results as BenchResult[]).map((r) => `${r.config} ${r.threads}`);
    // Every configuration at 1 thread, then every one at 2.
    expect(runs).toEqual(['etna-shared 1', 'etna-unshared 1', 'onnxruntime 1', 'etna-shared 2', 'etna-unshared 2', 'onnxruntime 2']);
    expect(json.threadScaling.map((r) => r.method).sort()).toEqual(['reset', 'step']);
    for (const scaling of json.threadScaling) {
      expect(scaling.program).toBe('gru-stream');
      expect(scaling.byThreads.map((f) => f.threads)).toEqual([1, 2]);
      for (const figures of scaling.byThreads) {
        expect(figures.etna!.p95Ms).toBeGreaterThanOrEqual(figures.etna!.p50Ms);
        expect(figures.onnxruntime!.p95Ms).toBeGreaterThanOrEqual(figures.onnxruntime!.p50Ms);
      }
      expect(scaling.speedUps.map((s) => [s.from, s.to])).toEqual([[1, 2]]);
    }

    const text = printed.join('\n');
    expect(text).toContain('etna 1→2');
    expect(text).toContain('gru-stream step goals:');
    // The methods' comparison in one process ran at both counts too.
    expect(text).toMatch(/Methods beside onnxruntime, one process, 1 and 2 threads/);
    expect(text.split('\n').filter((line) => /^gru-stream\s+step\s+[12]\s/.test(line))).toHaveLength(2);
  }, 180_000);
});
