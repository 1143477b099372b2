// What `etna bench llm` prints and writes: the run's header lines and its
// table, as text or Markdown.
import { formatBytes, table } from '../../../format.js';
import type { LlmBenchReport } from './harness.js';

const ms = (value: number): string => (value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2));
const range = (t: { minMs: number; medianMs: number }): string => `${ms(t.minMs)} / ${ms(t.medianMs)}`;

/** The report's rows: header first. */
export function llmTableRows(report: LlmBenchReport): string[][] {
  const lengths = Object.keys(report.rows[0]?.prefill ?? {});
  const header = [
    'runtime',
    'threads',
    'load ms',
    'RSS after load',
    ...lengths.map((n) => `prefill ${n} ms (min / median)`),
    'decode ms/token (min / median)',
    'decode GB/s (min / median)',
    'of read bandwidth (min / median)',
    'log-probs vs etna',
  ];
  const rows = report.rows.map((r) => [
    r.runtime,
    String(r.threads),
    ms(r.loadMs),
    formatBytes(r.rssAfterLoadBytes),
    ...lengths.map((n) => (r.prefill[n] === undefined ? '-' : range(r.prefill[n]!))),
    range(r.decode),
    `${(r.decodeBytesPerStep / r.decode.minMs / 1e6).toFixed(1)} / ${(r.decodeBytesPerStep / r.decode.medianMs / 1e6).toFixed(1)}`,
    `${(r.bandwidthFraction.min * 100).toFixed(0)}% / ${(r.bandwidthFraction.median * 100).toFixed(0)}%`,
    r.differenceFromEtna === null ? '-' : r.differenceFromEtna.toFixed(3),
  ]);
  return [header, ...rows];
}

export function formatLlmReport(report: LlmBenchReport): string {
  const C = report.config;
  const threads = (n: number): string => `${n} thread${n === 1 ? '' : 's'}`;
  const bandwidth = report.bandwidth.map((b) => `${(b.bytesPerSecond / 1e9).toFixed(1)} GB/s at ${threads(b.threads)}`);
  const lines = [
    `${report.preset}: ${C.layers} layers, d=${C.modelDim}, ${C.heads} query / ${C.kvHeads} KV heads, hidden ${C.hiddenDim}, ` +
      `vocab ${C.vocab}, context ${C.context}`,
    `files: .pte ${formatBytes(report.files.pte)}, .gguf ${formatBytes(report.files.gguf)}, .onnx ${formatBytes(report.files.onnx)}`,
    `cpu: ${report.cpu}; load average ${report.loadAverage.toFixed(1)} at the start`,
    `read bandwidth: ${bandwidth.join(', ')}`,
    `decode: ${report.decodeSteps} steps after a ${report.decodeAfter}-token prompt; ` +
      `RSS: above the process's own with the runtime's library loaded`,
    '',
    table(llmTableRows(report)),
  ];
  return lines.join('\n');
}

export function formatLlmMarkdown(report: LlmBenchReport): string {
  const [header, ...rows] = llmTableRows(report);
  return [`| ${header!.join(' | ')} |`, `|${header!.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join(
    '\n',
  );
}
