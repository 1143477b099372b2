// Text helpers shared by the CLI commands.
import type { ValueDescription } from '../program-types.js';

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 * 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
  return `${(bytes / (1024 * 1024 * 1024)).toFixed(2)} GiB`;
}

export function formatValue(value: ValueDescription): string {
  if (value.kind !== 'tensor') return value.kind;
  const shape = `${value.dtype}[${(value.shape ?? []).join('x')}]`;
  const notes: string[] = [];
  if (value.dynamism && value.dynamism !== 'static') notes.push(`${value.dynamism} shape`);
  if (!value.planned) notes.push('unplanned');
  return notes.length > 0 ? `${shape} (${notes.join(', ')})` : shape;
}

/** Left-aligned columns, two spaces apart. */
export function table(rows: string[][]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')).join('\n');
}
