// Profiled calls: every instruction and delegate stage timed natively, kept
// per module, written as a Chrome trace and summarised by `etna run --profile`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ProgramBuilder, writePte, type PteInstruction, type PteMethod } from '../../lib/export/index.js';
import { buildExample } from '../../lib/tools/examples/index.js';
import { EtnaError, Module, summarizeProfile, Tensor, toChromeTrace, type InputValue, type ProfileEvent } from '../../lib/index.js';
import { runCli } from '../helpers/cli.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-profile-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// The kv-decoder lowered to XNNPACK: kernel calls and delegate calls, each
// delegate running several stages.
let pte: Uint8Array;
let ptePath: string;
beforeAll(() => {
  pte = buildExample('kv-decoder').export({ xnnpack: true }).bytes;
  ptePath = path.join(dir, 'kv-decoder-xnnpack.pte');
  fs.writeFileSync(ptePath, pte);
});

function prefillInputs(): InputValue[] {
  return [
    { dtype: 'int64', shape: [1, 8], data: BigInt64Array.from([1n, 5n, 9n, 2n, 7n, 3n, 4n, 8n]) },
    { dtype: 'int64', shape: [1], data: BigInt64Array.from([0n]) },
  ];
}

function instructionCount(module: Module, method: string): number {
  return Object.values(module.methodMeta(method).instructions).reduce((sum, n) => sum + n, 0);
}

// Children (depth + 1) that follow an event lie inside it and after each other.
function expectWellNested(events: readonly ProfileEvent[]): void {
  const open: ProfileEvent[] = [];
  const lastChildEnd = new Map<ProfileEvent, number>();
  const epsilon = 1e-6;
  for (const event of events) {
    expect(event.durationUs).toBeGreaterThanOrEqual(0);
    while (open.length > 0 && open[open.length - 1]!.depth >= event.depth) open.pop();
    const parent = open[open.length - 1];
    if (event.depth === 0) {
      expect(parent).toBeUndefined();
    } else {
      expect(parent, `${event.name} has no parent`).toBeDefined();
      expect(parent!.depth).toBe(event.depth - 1);
      expect(event.startUs).toBeGreaterThanOrEqual(parent!.startUs - epsilon);
      expect(event.startUs + event.durationUs).toBeLessThanOrEqual(parent!.startUs + parent!.durationUs + epsilon);
      expect(event.startUs).toBeGreaterThanOrEqual((lastChildEnd.get(parent!) ?? -Infinity) - epsilon);
      lastChildEnd.set(parent!, event.startUs + event.durationUs);
    }
    open.push(event);
  }
}

describe('profiled calls', () => {
  it('record the call, every instruction and the delegate stages inside their delegate call', async () => {
    const module = await Module.load(pte);
    const plain = await Module.load(pte);
    const [profiled] = await module.execute('prefill', prefillInputs(), { profile: true });
    const [expected] = await plain.execute('prefill', prefillInputs());
    expect((profiled as Tensor).data).toEqual((expected as Tensor).data);
    await plain.dispose();

    const events = module.takeProfile();
    expect(module.takeProfile()).toEqual([]);
    expectWellNested(events);
    expect(events[0]).toMatchObject({ name: 'execute', category: 'js', method: 'prefill', depth: 0, call: 0 });
    expect(events[1]).toMatchObject({ name: 'prefill', category: 'call', depth: 1, index: -1 });
    expect(events.filter((event) => event.depth <= 1)).toHaveLength(2);

    const meta = module.methodMeta('prefill');
    const instructions = events.filter((event) => event.depth === 2);
    expect(instructions.map((event) => event.index)).toEqual([...Array(instructionCount(module, 'prefill')).keys()]);
    for (const event of instructions) {
      if (event.category === 'kernel') expect(meta.operators).toContain(event.name);
      else expect(event).toMatchObject({ category: 'delegate', name: 'XnnpackBackend' });
    }
    expect(instructions.filter((event) => event.category === 'kernel')).toHaveLength(meta.instructions.KernelCall ?? 0);
    expect(instructions.filter((event) => event.category === 'delegate')).toHaveLength(meta.instructions.DelegateCall ?? 0);

    // Every delegate call runs stages, numbered from 0, nested inside it.
    const stages = events.filter((event) => event.category === 'stage');
    expect(stages.every((event) => event.depth === 3)).toBe(true);
    events.forEach((event, i) => {
      if (event.category !== 'delegate') return;
      const own: ProfileEvent[] = [];
      for (let k = i + 1; k < events.length && events[k]!.depth === 3; k++) own.push(events[k]!);
      expect(own.length, `delegate at instruction ${event.index}`).toBeGreaterThan(0);
      expect(own.map((stage) => stage.index)).toEqual([...own.keys()]);
    });
    for (const stage of stages) expect(stage.name).toMatch(/^subgraph: XNN|^XNN\w+ \((packed operator|etna kernel)\)$/);
    expect(stages.some((stage) => stage.name.includes('packed operator'))).toBe(true);

    // The instructions account for the call's natively measured time.
    const covered = instructions.reduce((sum, event) => sum + event.durationUs, 0);
    expect(covered).toBeGreaterThanOrEqual(0.9 * events[1]!.durationUs);
    await module.dispose();
  });

  it('record MoveCall, JumpFalseCall and FreeCall, and only the instructions that ran', async () => {
    const builder = new ProgramBuilder();
    builder.method('forward', (m) => m.output(m.add(m.input('x', 'float32', [4]), 1)));
    const { program } = builder.export();
    const method = program.methods[0]!;
    const x = method.inputs[0]!;
    const no = method.values.length;
    const n = method.instructions.length;
    const extra: PteInstruction[] = [
      { kind: 'move', from: x, to: x },
      { kind: 'jumpFalse', condition: no, destination: n + 3 },
      { kind: 'move', from: x, to: x }, // jumped over
      { kind: 'free', value: x },
    ];
    const patched: PteMethod = {
      ...method,
      values: [...method.values, { kind: 'bool', value: false }],
      instructions: [...method.instructions, ...extra],
    };
    const module = await Module.load(writePte({ ...program, methods: [patched] }));
    const [y] = await module.execute('forward', [Tensor.float32([4], [1, 2, 3, 4])], { profile: true });
    expect([...(y as Tensor<'float32'>).data]).toEqual([2, 3, 4, 5]);
    const instructions = module.takeProfile().filter((event) => event.depth === 2);
    expect(instructions.map((event) => event.index)).toEqual([...Array(n).keys(), n, n + 1, n + 3]);
    expect(instructions.slice(n).map((event) => [event.category, event.name])).toEqual([
      ['instruction', 'MoveCall'],
      ['instruction', 'JumpFalseCall'],
      ['instruction', 'FreeCall'],
    ]);
    await module.dispose();
  });

  it('records nothing unless asked; startProfiling turns it on until endProfiling', async () => {
    const module = await Module.load(pte);
    await module.execute('prefill', prefillInputs());
    module.executeSync('reset');
    expect(module.takeProfile()).toEqual([]);

    module.startProfiling();
    await module.execute('reset');
    await module.execute('reset', [], { profile: false });
    await module.run('prefill', { tokens: prefillInputs()[0]!, start_pos: prefillInputs()[1]! });
    const events = module.endProfiling();
    await module.execute('reset');
    expect(module.takeProfile()).toEqual([]);

    const calls = events.filter((event) => event.category === 'call');
    expect(calls.map((event) => [event.name, event.call])).toEqual([
      ['reset', 2],
      ['prefill', 4],
    ]);
    expect(new Set(events.map((event) => event.module)).size).toBe(1);
    expectWellNested(events);
    await module.dispose();
  });

  it('profiles executeSync and run, and refuses a profile option that is not a boolean', async () => {
    const module = await Module.load(pte);
    module.executeSync('prefill', prefillInputs(), { profile: true });
    await module.run('reset', {}, { profile: true });
    const events = module.takeProfile();
    expect(events.filter((event) => event.category === 'js').map((event) => [event.name, event.method])).toEqual([
      ['executeSync', 'prefill'],
      ['execute', 'reset'],
    ]);
    expect(events.filter((event) => event.category === 'call').map((event) => event.name)).toEqual(['prefill', 'reset']);
    expectWellNested(events);
    // @ts-expect-error: not a boolean
    await expect(module.execute('reset', [], { profile: 'yes' })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    // @ts-expect-error: not a boolean
    expect(() => module.executeSync('reset', [], { profile: 1 })).toThrow(EtnaError);
    await module.dispose();
  });

  it('keeps the events of modules running in parallel apart', async () => {
    const [a, b] = await Promise.all([Module.load(pte), Module.load(pte)]);
    await Promise.all([
      a.execute('prefill', prefillInputs(), { profile: true }),
      b.execute('prefill', prefillInputs(), { profile: true }),
      a.execute('reset', [], { profile: true }),
    ]);
    const eventsA = a.takeProfile();
    const eventsB = b.takeProfile();
    expect(eventsA.filter((event) => event.category === 'call').map((event) => event.name)).toEqual(['prefill', 'reset']);
    expect(eventsB.filter((event) => event.category === 'call').map((event) => event.name)).toEqual(['prefill']);
    const moduleA = eventsA[0]!.module;
    expect(eventsA.every((event) => event.module === moduleA)).toBe(true);
    expect(eventsB.every((event) => event.module === eventsB[0]!.module && event.module !== moduleA)).toBe(true);
    expectWellNested(eventsA);
    expectWellNested(eventsB);
    await Promise.all([a.dispose(), b.dispose()]);
  });
});

describe('toChromeTrace and summarizeProfile', () => {
  it('write complete events with the trace fields, nested as recorded', async () => {
    const module = await Module.load(pte);
    await module.execute('prefill', prefillInputs(), { profile: true });
    await module.execute('reset', [], { profile: true });
    const events = module.takeProfile();
    const trace: unknown = JSON.parse(JSON.stringify(toChromeTrace(events, { pid: 7 })));
    expect(Array.isArray(trace)).toBe(true);
    const list = trace as Record<string, unknown>[];
    expect(list).toHaveLength(events.length);
    for (const [i, entry] of list.entries()) {
      expect(entry).toMatchObject({ name: events[i]!.name, cat: events[i]!.category, ph: 'X', pid: 7, tid: events[i]!.module });
      expect(typeof entry.ts).toBe('number');
      expect(typeof entry.dur).toBe('number');
      expect(entry.args).toMatchObject({ method: events[i]!.method, call: events[i]!.call });
    }
    expect(list[0]!.ts).toBe(0);
    // Rounded times still nest: read back as events, the trace is well nested.
    expectWellNested(list.map((entry, i) => ({ ...events[i]!, startUs: entry.ts as number, durationUs: entry.dur as number })));
    await module.dispose();
  });

  it('summarises self time per name: delegate stages are not counted twice', async () => {
    const module = await Module.load(pte);
    await module.execute('prefill', prefillInputs(), { profile: true });
    const events = module.takeProfile();
    const rows = summarizeProfile(events);
    const instructionsMs = events.filter((event) => event.depth === 2).reduce((sum, event) => sum + event.durationUs / 1000, 0);
    const selfMs = rows.reduce((sum, row) => sum + row.selfMs, 0);
    expect(selfMs).toBeCloseTo(instructionsMs, 6);
    expect(rows.map((row) => row.selfMs)).toEqual(rows.map((row) => row.selfMs).sort((x, y) => y - x));
    expect(rows.some((row) => row.category === 'js' || row.category === 'call')).toBe(false);
    const delegate = rows.find((row) => row.category === 'delegate')!;
    const delegateMs = events.filter((event) => event.category === 'delegate').reduce((sum, event) => sum + event.durationUs / 1000, 0);
    const stagesMs = events.filter((event) => event.category === 'stage').reduce((sum, event) => sum + event.durationUs / 1000, 0);
    expect(delegate.selfMs).toBeCloseTo(delegateMs - stagesMs, 6);
    const callMs = events[1]!.durationUs / 1000;
    for (const row of rows) expect(row.percent).toBeCloseTo((row.selfMs / callMs) * 100, 6);
    await module.dispose();
  });
});

describe('etna run --profile', () => {
  it('writes the trace file and prints the ten costliest names', () => {
    const trace = path.join(dir, 'trace.json');
    const result = runCli(['run', ptePath, '--method', 'prefill', '--profile', trace]);
    expect(result.status, result.stderr).toBe(0);
    const events = JSON.parse(fs.readFileSync(trace, 'utf8')) as Record<string, unknown>[];
    expect(events.filter((event) => event.cat === 'call').map((event) => event.name)).toEqual(['prefill']);
    expect(events.some((event) => event.cat === 'stage')).toBe(true);
    expect(events.every((event) => event.ph === 'X')).toBe(true);

    const lines = result.stdout.split('\n');
    const header = lines.findIndex((line) => /name\s+kind\s+calls\s+self ms\s+% of calls/.test(line));
    expect(header, result.stdout).toBeGreaterThan(0);
    expect(lines[header - 1]).toContain(`1 call`);
    expect(lines[header - 1]).toContain(trace);
    const rows = lines.slice(header + 1).filter((line) => line.trim() !== '');
    expect(rows).toHaveLength(10);
    for (const row of rows) expect(row).toMatch(/\s(kernel|delegate|stage|instruction)\s+\d+\s+\d+\.\d{3}\s+\d+\.\d%$/);
  });

  it('keeps stdout one JSON object with --json and prints the table on stderr', () => {
    const trace = path.join(dir, 'trace-json.json');
    const result = runCli(['run', ptePath, '--method', 'reset', '--profile', trace, '--json']);
    expect(result.status, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ calls: [{ method: 'reset', outputs: [] }] });
    expect(result.stderr).toContain('self ms');
    expect(JSON.parse(fs.readFileSync(trace, 'utf8'))).toEqual(
      expect.arrayContaining([expect.objectContaining({ cat: 'call', name: 'reset' })]),
    );
  });
});
