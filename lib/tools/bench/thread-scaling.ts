// `etna bench --threads 1,2`: each workload (a program's method) of etna
// (etna-shared) and of onnxruntime at every thread count, side by side: p50 and
// p95, the etna/onnxruntime ratio at each count and each runtime's speed-up
// from the first count to the others, with the thread goals checked (reported,
// never failed on). Pure functions of a report's rows; report.ts writes them.
import { markdownTable, table } from '../../format.js';
import type { BenchReport } from './harness.js';
import type { BenchConfig, BenchResult, LatencyFigures } from './runner.js';

/** etna as the bench recommends it, and onnxruntime as its users run the model. */
const ETNA_CONFIG: BenchConfig = 'etna-shared';
const ONNXRUNTIME_CONFIG: BenchConfig = 'onnxruntime';

/**
 * What two threads should give. Each is checked only where it applies: the
 * tail and the ratio when 2 threads ran, the speed-up when 1 and 2 both ran
 * and only on the workloads big enough to split.
 */
export const THREAD_GOALS = {
  threads: 2,
  /** etna's p95 at most this many times its p50. */
  tail: 2,
  /** etna's p50 at 2 threads at most this fraction of its p50 at 1. */
  speedUp: 0.75,
  speedUpWorkloads: ['dbnet-det forward', 'svtr-rec forward', 'kv-decoder-large prefill'] as readonly string[],
  /** etna's p50 at most this many times onnxruntime's. */
  vsOnnxruntime: 1,
} as const;

export interface ThreadFigures {
  threads: number;
  etna: LatencyFigures | null;
  onnxruntime: LatencyFigures | null;
  /** etna p50 / onnxruntime p50. */
  ratio: number | null;
}

/** p50 at `from` threads over p50 at `to` threads: above 1, the call got faster with more threads. */
export interface SpeedUp {
  from: number;
  to: number;
  etna: number | null;
  onnxruntime: number | null;
}

export interface GoalCheck {
  goal: 'tail' | 'speed-up' | 'vs-onnxruntime';
  /** tail: etna p95 / p50 at 2 threads; speed-up: etna p50 at 2 threads / at 1; vs-onnxruntime: etna p50 / onnxruntime p50 at 2 threads. */
  value: number;
  /** The goal is met when value <= limit. */
  limit: number;
  met: boolean;
}

export interface ThreadScalingRow {
  program: string;
  method: string;
  /** One entry per thread count, in the order they ran. */
  byThreads: ThreadFigures[];
  /** From the first count to each later one. */
  speedUps: SpeedUp[];
  goals: GoalCheck[];
}

const divide = (a: number | undefined, b: number | undefined): number | null =>
  a === undefined || b === undefined || !(b > 0) ? null : a / b;

function goalsOf(program: string, method: string, byThreads: readonly ThreadFigures[]): GoalCheck[] {
  const at = (threads: number): ThreadFigures | undefined => byThreads.find((figures) => figures.threads === threads);
  const two = at(THREAD_GOALS.threads);
  const one = at(1);
  const goals: GoalCheck[] = [];
  const check = (goal: GoalCheck['goal'], value: number | null, limit: number): void => {
    if (value !== null) goals.push({ goal, value, limit, met: value <= limit });
  };
  check('tail', divide(two?.etna?.p95Ms, two?.etna?.p50Ms), THREAD_GOALS.tail);
  if (THREAD_GOALS.speedUpWorkloads.includes(`${program} ${method}`)) {
    check('speed-up', divide(two?.etna?.p50Ms, one?.etna?.p50Ms), THREAD_GOALS.speedUp);
  }
  check('vs-onnxruntime', two?.ratio ?? null, THREAD_GOALS.vsOnnxruntime);
  return goals;
}

/**
 * A row per workload (each method of each program with an etna-shared row),
 * in the report's order: etna-shared and onnxruntime at each thread count.
 */
export function threadScaling(report: Pick<BenchReport, 'results' | 'threadCounts'>): ThreadScalingRow[] {
  const rows = report.results.filter((row): row is BenchResult => !('sessions' in row));
  const find = (program: string, config: BenchConfig, threads: number): BenchResult | undefined =>
    rows.find((r) => r.program === program && r.config === config && r.threads === threads);
  const workloads: { program: string; method: string }[] = [];
  for (const row of rows) {
    if (row.config !== ETNA_CONFIG) continue;
    for (const method of Object.keys(row.latency)) {
      if (!workloads.some((w) => w.program === row.program && w.method === method)) workloads.push({ program: row.program, method });
    }
  }
  return workloads.map(({ program, method }) => {
    const byThreads = report.threadCounts.map((threads): ThreadFigures => {
      const etna = find(program, ETNA_CONFIG, threads)?.latency[method] ?? null;
      const onnxruntime = find(program, ONNXRUNTIME_CONFIG, threads)?.latency[method] ?? null;
      return { threads, etna, onnxruntime, ratio: divide(etna?.p50Ms, onnxruntime?.p50Ms) };
    });
    const [first, ...later] = byThreads;
    const speedUps = later.map(
      (to): SpeedUp => ({
        from: first!.threads,
        to: to.threads,
        etna: divide(first!.etna?.p50Ms, to.etna?.p50Ms),
        onnxruntime: divide(first!.onnxruntime?.p50Ms, to.onnxruntime?.p50Ms),
      }),
    );
    return { program, method, byThreads, speedUps, goals: goalsOf(program, method, byThreads) };
  });
}

const ms = (value: number): string => (value < 1 ? value.toFixed(3) : value.toFixed(2));
const pair = (figures: LatencyFigures | null): string => (figures === null ? '-' : `${ms(figures.p50Ms)} / ${ms(figures.p95Ms)}`);
/** Two decimals, or two significant digits below 0.1 so that a collapse does not print as 0.00x. */
const times = (value: number | null): string => {
  if (value === null) return '-';
  return `${value >= 0.1 ? value.toFixed(2) : value.toPrecision(2)}x`;
};

/** The table's rows, header first: per count etna and onnxruntime p50 / p95 and their ratio, then the speed-ups. */
export function threadScalingRows(rows: readonly ThreadScalingRow[], threadCounts: readonly number[]): string[][] {
  const [first, ...later] = threadCounts;
  const header = [
    'program',
    'method',
    ...threadCounts.flatMap((t) => [`etna ${t}t p50/p95 ms`, `ort ${t}t p50/p95 ms`, `etna/ort ${t}t`]),
    ...later.flatMap((t) => [`etna ${first}→${t}`, `ort ${first}→${t}`]),
  ];
  const body = rows.map((row) => [
    row.program,
    row.method,
    ...row.byThreads.flatMap((f) => [pair(f.etna), pair(f.onnxruntime), times(f.ratio)]),
    ...row.speedUps.flatMap((s) => [times(s.etna), times(s.onnxruntime)]),
  ]);
  return [header, ...body];
}

const GOAL_TEXT: Record<GoalCheck['goal'], string> = {
  tail: `p95/p50 at ${THREAD_GOALS.threads}t`,
  'speed-up': `p50 ${THREAD_GOALS.threads}t/1t`,
  'vs-onnxruntime': `etna/ort at ${THREAD_GOALS.threads}t`,
};

/** "dbnet-det forward goals: p95/p50 at 2t 1.31x (≤ 2x) met; ..."; nothing for a workload no goal applies to. */
export function goalLines(rows: readonly ThreadScalingRow[]): string[] {
  return rows
    .filter((row) => row.goals.length > 0)
    .map((row) => {
      const checks = row.goals.map((g) => `${GOAL_TEXT[g.goal]} ${g.value.toFixed(2)}x (≤ ${g.limit}x) ${g.met ? 'met' : 'missed'}`);
      return `${row.program} ${row.method} goals: ${checks.join('; ')}`;
    });
}

const CAPTION =
  'Per thread count (Nt: N threads), etna-shared and onnxruntime p50 / p95 ms from the rows above and the p50 ratio; ' +
  'a→b: p50 at a threads over p50 at b (above 1x: faster with more threads).';

export function formatThreadScaling(report: Pick<BenchReport, 'results' | 'threadCounts'>): string {
  const rows = threadScaling(report);
  return [CAPTION, table(threadScalingRows(rows, report.threadCounts)), ...goalLines(rows)].join('\n');
}

export function formatThreadScalingMarkdown(report: Pick<BenchReport, 'results' | 'threadCounts'>): string {
  const rows = threadScaling(report);
  const goals = goalLines(rows);
  const text = markdownTable(CAPTION, threadScalingRows(rows, report.threadCounts));
  return goals.length === 0 ? text : `${text}\n${goals.map((line) => `- ${line}`).join('\n')}\n`;
}
