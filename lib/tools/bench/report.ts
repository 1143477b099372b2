// What `etna bench` writes: the programs x configurations table (console and
// Markdown), the JSON report, the SVG chart, the sessions entry's table and
// the tables of the comparisons timed in one process. With several thread
// counts, the table of each workload across them is thread-scaling.ts's.
import { formatBytes, markdownTable, table } from '../../format.js';
import type { BenchReport, MethodComparison } from './harness.js';
import type { AlternatedTiming, OnnxGraphComparison } from './onnx-graphs.js';
import type { BenchConfig, BenchResult, LatencyFigures } from './runner.js';
import type { SessionsResult } from './sessions.js';
import { formatThreadScalingMarkdown, threadScaling } from './thread-scaling.js';

const mib = (bytes: number | null): string => (bytes === null ? '-' : (bytes / (1024 * 1024)).toFixed(1));
const ms = (value: number | undefined): string => {
  if (value === undefined || Number.isNaN(value)) return '-';
  return value < 1 ? value.toFixed(3) : value.toFixed(2);
};

/** "yes", or why not: without shared arenas a stateful program's state does not carry over by design. */
export function matchLabel(result: BenchResult): string {
  if (result.outputsMatch) return 'yes';
  if (result.config === 'etna-unshared' && result.stateful) return 'no: state not shared (expected)';
  return `NO (max error ${result.maxError.toExponential(1)})`;
}

function methodsOf(results: readonly BenchResult[]): string[] {
  const methods: string[] = [];
  for (const result of results) for (const method of Object.keys(result.latency)) if (!methods.includes(method)) methods.push(method);
  return methods;
}

/** The rows of the programs x configurations table (the sessions entry has its own). */
export function programResults(report: BenchReport): BenchResult[] {
  return report.results.filter((row): row is BenchResult => !('sessions' in row));
}

/** The sessions entry's rows of a report (programResults has the others). */
export function sessionsResults(report: BenchReport): SessionsResult[] {
  return report.results.filter((row): row is SessionsResult => 'sessions' in row);
}

function reportRows(report: BenchReport): string[][] {
  const methods = methodsOf(programResults(report));
  // With one thread count the table stays as it always was; with several each row says its count.
  const several = report.threadCounts.length > 1;
  const header = [
    'program',
    'config',
    ...(several ? ['threads'] : []),
    'planned',
    'peak RSS MiB',
    'steady RSS MiB',
    'baseline RSS MiB',
    'packed',
    'load ms',
    ...methods.map((m) => `${m} p50/p95 ms`),
    'outputs match',
  ];
  const rows = programResults(report).map((r) => [
    r.program,
    r.config,
    ...(several ? [String(r.threads)] : []),
    r.plannedBytes === null ? '-' : formatBytes(r.plannedBytes),
    mib(r.peakRssBytes),
    mib(r.steadyRssBytes),
    mib(r.baselineRssBytes),
    r.packedWeightBytes === null ? '-' : formatBytes(r.packedWeightBytes),
    ms(r.loadMs),
    ...methods.map((m) => (r.latency[m] === undefined ? '-' : `${ms(r.latency[m]!.p50Ms)} / ${ms(r.latency[m]!.p95Ms)}`)),
    matchLabel(r),
  ]);
  return [header, ...rows];
}

export function formatConsoleTable(report: BenchReport): string {
  return table(reportRows(report));
}

export function formatMarkdown(report: BenchReport): string {
  const counts = report.threadCounts;
  const threads = counts.length > 1 ? `${counts.join(', ')} threads` : `${report.threads} thread(s)`;
  const main = markdownTable(
    `Node ${report.node}, ${report.cpu}, ${threads}. Latency after warm-up, one call at a time.`,
    reportRows(report),
  );
  return counts.length > 1 ? `${main}\n${formatThreadScalingMarkdown(report)}` : main;
}

/** The report as JSON; with several thread counts it adds `threadScaling` (see threadScaling). */
export function formatJson(report: BenchReport): string {
  const scaling = report.threadCounts.length > 1 ? { threadScaling: threadScaling(report) } : {};
  return `${JSON.stringify({ ...report, ...scaling }, null, 2)}\n`;
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const CONFIG_COLORS: Record<BenchConfig, string> = {
  'etna-shared': '#2b7bba',
  'etna-unshared': '#8fbde0',
  onnxruntime: '#d9822b',
  'onnxruntime-folded': '#f0b97a',
};

/**
 * Per program (and thread count, when there are several), two panels side by
 * side: resident memory (peak and steady) and p50 latency of each method.
 * Each configuration's bars form one <g> group.
 */
export function formatSvg(report: BenchReport): string {
  const rows = programResults(report);
  const several = report.threadCounts.length > 1;
  const panels: { program: string; threads: number; results: BenchResult[] }[] = [];
  for (const r of rows) {
    const panel = panels.find((p) => p.program === r.program && (!several || p.threads === r.threads));
    if (panel === undefined) panels.push({ program: r.program, threads: r.threads, results: [r] });
    else panel.results.push(r);
  }
  const panelWidth = 360;
  const panelHeight = 160;
  const rowHeight = panelHeight + 70;
  const width = 2 * panelWidth + 60;
  const height = panels.length * rowHeight + 40;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
      `font-family="sans-serif" font-size="11">`,
  );
  parts.push(`<title>etna bench: memory and latency per configuration</title>`);
  parts.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  // Legend
  const configs = [...new Set(rows.map((r) => r.config))];
  configs.forEach((config, i) => {
    parts.push(
      `<rect x="${20 + i * 130}" y="10" width="10" height="10" fill="${CONFIG_COLORS[config]}"/>` +
        `<text x="${34 + i * 130}" y="19">${config}</text>`,
    );
  });
  panels.forEach(({ program, threads, results }, row) => {
    const top = 40 + row * rowHeight;
    const title = several ? `${program}, ${threads} thread${threads === 1 ? '' : 's'}` : program;
    const groupAttributes = `data-program="${escapeXml(program)}"${several ? ` data-threads="${threads}"` : ''}`;
    const methods = methodsOf(results);
    const memoryMax = Math.max(1, ...results.map((r) => r.peakRssBytes));
    const latencyMax = Math.max(1e-6, ...results.flatMap((r) => methods.map((m) => r.latency[m]?.p50Ms ?? 0)));
    parts.push(`<text x="20" y="${top + 12}" font-weight="bold">${escapeXml(title)}</text>`);
    parts.push(`<text x="20" y="${top + 28}">resident memory, MiB (peak, steady)</text>`);
    parts.push(`<text x="${panelWidth + 40}" y="${top + 28}">p50 latency per method, ms</text>`);
    const baseY = top + 40 + panelHeight - 20;
    const memorySlots = 2;
    const latencySlots = Math.max(1, methods.length);
    const groupWidth = (panelWidth - 20) / results.length;
    results.forEach((result, g) => {
      const color = CONFIG_COLORS[result.config] ?? '#777';
      parts.push(`<g class="bar-group" ${groupAttributes} data-config="${escapeXml(result.config)}">`);
      const bar = (x: number, w: number, value: number, max: number, label: string, tooltip: string): void => {
        const h = Math.max(1, (value / max) * (panelHeight - 40));
        parts.push(
          `<rect class="bar" x="${x.toFixed(1)}" y="${(baseY - h).toFixed(1)}" width="${w.toFixed(1)}" height="${h.toFixed(1)}" ` +
            `fill="${color}"><title>${escapeXml(tooltip)}</title></rect>`,
        );
        parts.push(
          `<text x="${(x + w / 2).toFixed(1)}" y="${(baseY - h - 3).toFixed(1)}" text-anchor="middle" ` +
            `font-size="9">${escapeXml(label)}</text>`,
        );
      };
      const memoryX = 20 + g * groupWidth;
      const memoryBar = (groupWidth - 12) / memorySlots;
      bar(
        memoryX,
        memoryBar - 2,
        result.peakRssBytes,
        memoryMax,
        mib(result.peakRssBytes),
        `${result.config} peak RSS ${mib(result.peakRssBytes)} MiB`,
      );
      bar(
        memoryX + memoryBar,
        memoryBar - 2,
        result.steadyRssBytes,
        memoryMax,
        mib(result.steadyRssBytes),
        `${result.config} steady RSS ${mib(result.steadyRssBytes)} MiB`,
      );
      const latencyX = panelWidth + 40 + g * groupWidth;
      const latencyBar = (groupWidth - 12) / latencySlots;
      methods.forEach((method, k) => {
        const value = result.latency[method]?.p50Ms ?? 0;
        bar(latencyX + k * latencyBar, latencyBar - 2, value, latencyMax, ms(value), `${result.config} ${method} p50 ${ms(value)} ms`);
      });
      parts.push(
        `<text x="${(memoryX + (groupWidth - 12) / 2).toFixed(1)}" y="${baseY + 14}" ` +
          `text-anchor="middle">${escapeXml(result.config)}</text>`,
      );
      parts.push(
        `<text x="${(latencyX + (groupWidth - 12) / 2).toFixed(1)}" y="${baseY + 14}" ` +
          `text-anchor="middle">${escapeXml(methods.join(' / '))}</text>`,
      );
      parts.push('</g>');
    });
    parts.push(`<line x1="20" y1="${baseY}" x2="${panelWidth}" y2="${baseY}" stroke="#333"/>`);
    parts.push(`<line x1="${panelWidth + 40}" y1="${baseY}" x2="${2 * panelWidth + 20}" y2="${baseY}" stroke="#333"/>`);
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

// ------------------------------------------------------------------ sessions entry

const p50 = (figures: LatencyFigures | undefined): string => (figures === undefined ? '-' : figures.p50Ms.toFixed(2));

function sessionsRows(results: readonly SessionsResult[]): string[][] {
  const header = [
    'program',
    'config',
    'sessions',
    'RSS MiB',
    'over baseline MiB',
    'per session MiB',
    'threads',
    'threads added',
    'load ms',
    'prefill p50 ms',
    'decode p50 ms',
    'outputs match',
  ];
  const rows = results.map((r) => {
    const added = r.steadyRssBytes - r.baselineRssBytes;
    return [
      r.program,
      r.config,
      String(r.sessions),
      mib(r.steadyRssBytes),
      mib(added),
      mib(added / r.sessions),
      String(r.threads),
      String(r.addedThreads),
      r.loadMs.toFixed(0),
      p50(r.sessionLatency['prefill']),
      p50(r.sessionLatency['decode']),
      r.outputsMatch ? 'yes' : `NO (max error ${r.maxError.toExponential(1)})`,
    ];
  });
  return [header, ...rows];
}

export function formatSessionsTable(results: readonly SessionsResult[]): string {
  return table(sessionsRows(results));
}

export function formatSessionsMarkdown(results: readonly SessionsResult[]): string {
  return markdownTable(
    'Sessions: one stream per session, calls interleaved one at a time; RSS and threads added once every session has loaded and run.',
    sessionsRows(results),
  );
}

// ------------------------------------------------------------------ comparisons in one process

/** Whether the rows ran at more than one thread count: only then do the tables get a `threads` column. */
const severalThreads = (rows: readonly { threads: number }[]): boolean => new Set(rows.map((row) => row.threads)).size > 1;

// The columns every side-by-side comparison shares, after the row's own names.
const COMPARISON_HEADERS = [
  'etna p50 ms',
  'onnxruntime p50 ms',
  'etna / onnxruntime',
  'min ms (etna / onnxruntime)',
  'max diff / max |output|',
];

function comparisonCells(r: AlternatedTiming & { relativeError: number }, digits: number): string[] {
  return [
    r.etnaP50Ms.toFixed(digits),
    r.onnxruntimeP50Ms.toFixed(digits),
    `${r.ratio.toFixed(2)}x`,
    `${r.etnaMinMs.toFixed(digits)} / ${r.onnxruntimeMinMs.toFixed(digits)}`,
    r.relativeError.toExponential(1),
  ];
}

export function formatMethodComparisons(rows: readonly MethodComparison[]): string[][] {
  const several = severalThreads(rows);
  return [
    ['program', 'method', ...(several ? ['threads'] : []), ...COMPARISON_HEADERS],
    ...rows.map((r) => [r.program, r.method, ...(several ? [String(r.threads)] : []), ...comparisonCells(r, 3)]),
  ];
}

export function formatOnnxGraphComparisons(rows: readonly OnnxGraphComparison[]): string[][] {
  const several = severalThreads(rows);
  return [
    ['graph', ...(several ? ['threads'] : []), ...COMPARISON_HEADERS, 'delegate calls', 'kernel calls'],
    ...rows.map((r) => [
      r.program,
      ...(several ? [String(r.threads)] : []),
      ...comparisonCells(r, 2),
      String(r.calls.delegate),
      String(r.calls.kernel),
    ]),
  ];
}
