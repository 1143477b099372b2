// A module's state (mem_id 2) saved as bytes and put back: into the same
// module, into another module over the same program, into a module in another
// process. A session continued from a snapshot gives what the session gives
// uninterrupted; a snapshot that does not fit is refused whole and the state
// stays as it was.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { Module, Program, Tensor } from '../../lib/index.js';
import { exportExample, GRU_STREAM_CONFIG, gruStreamSession, KV_DECODER_CONFIG, kvDecoderSession } from '../../lib/tools/examples/index.js';
import { LLAMA_8DA4W_CONFIG } from '../../lib/tools/examples/llama-8da4w.js';
import { outputsOf } from '../helpers/example-calls.js';
import { rejection, thrown } from '../helpers/errors.js';
import { repoRoot, testdataPath } from '../helpers/testdata.js';
import { llamaProgram } from '../llm/helpers.js';

const kvBytes = exportExample('kv-decoder', { xnnpack: true });
const gruBytes = exportExample('gru-stream');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-state-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

// The calls of one kv-decoder session that carry state across: past the reset.
const kvCalls = kvDecoderSession(KV_DECODER_CONFIG, 11).filter((call) => call.method !== 'reset');
const SPLIT = Math.floor(kvCalls.length / 2);

describe('saveState and restoreState', () => {
  it('continue a session in another module over the same program exactly as it would have gone on', async () => {
    expect(SPLIT).toBeGreaterThan(0);
    const program = Program.load(kvBytes);
    const first = await Module.load(program);
    const uninterrupted = await outputsOf(first, kvCalls);

    const a = await Module.load(program);
    await outputsOf(a, kvCalls.slice(0, SPLIT));
    const snapshot = await a.saveState();
    expect(snapshot).toBeInstanceOf(Uint8Array);
    expect(new TextDecoder().decode(snapshot.subarray(0, 4))).toBe('ETSS');
    const report = a.memoryReport();
    const stateArena = report.arenas.find((arena) => arena.memoryId === 2)!;
    // Header, one range, and no more bytes than the arena holds.
    expect(snapshot.byteLength).toBeGreaterThan(40);
    expect(snapshot.byteLength).toBeLessThanOrEqual(40 + 16 * 4 + stateArena.bytes);

    const b = await Module.load(program);
    await b.restoreState(snapshot);
    expect(await outputsOf(b, kvCalls.slice(SPLIT))).toEqual(uninterrupted.slice(SPLIT));
    // The module it came from goes on the same way.
    expect(await outputsOf(a, kvCalls.slice(SPLIT))).toEqual(uninterrupted.slice(SPLIT));
    await Promise.all([first.dispose(), a.dispose(), b.dispose()]);
    program.dispose();
  });

  it('rewind a module to where it was saved, any number of times', async () => {
    const m = await Module.load(Program.load(kvBytes));
    await outputsOf(m, kvCalls.slice(0, SPLIT));
    const snapshot = await m.saveState();
    const first = await outputsOf(m, kvCalls.slice(SPLIT));
    for (let i = 0; i < 2; i++) {
      await m.restoreState(snapshot.buffer);
      expect(await outputsOf(m, kvCalls.slice(SPLIT))).toEqual(first);
    }
    await m.dispose();
  });

  it('take the state after every call made before them, and the snapshot bytes when called', async () => {
    const m = await Module.load(Program.load(kvBytes));
    const sequential = await Module.load(Program.load(kvBytes));
    await outputsOf(sequential, kvCalls.slice(0, SPLIT));
    const expected = await sequential.saveState();

    const calls = kvCalls.slice(0, SPLIT).map((call) => m.execute(call.method, call.inputs));
    const saved = m.saveState();
    await Promise.all(calls);
    expect(sameBytes(await saved, expected)).toBe(true);

    // Queued behind a call, a restore reads the bytes as they were when it was asked for.
    const pending = m.execute(kvCalls[SPLIT]!.method, kvCalls[SPLIT]!.inputs);
    const snapshot = expected.slice();
    const restored = m.restoreState(snapshot);
    snapshot.fill(0);
    await pending;
    await restored;
    expect(sameBytes(await m.saveState(), expected)).toBe(true);
    await Promise.all([m.dispose(), sequential.dispose()]);
  });

  it("write into a caller's array when asked, sized by stateSnapshotBytes, and refuse one too short", async () => {
    const m = await Module.load(Program.load(kvBytes));
    await outputsOf(m, kvCalls.slice(0, SPLIT));
    const expected = await m.saveState();
    expect(m.stateSnapshotBytes()).toBe(expected.byteLength);
    const into = new Uint8Array(expected.byteLength + 10).fill(7);
    const written = await m.saveState({ into });
    expect(written.buffer).toBe(into.buffer);
    expect(written.byteLength).toBe(expected.byteLength);
    expect(sameBytes(written, expected)).toBe(true);
    // Bytes past the snapshot are the caller's and stay as they were.
    expect(Array.from(into.subarray(expected.byteLength))).toEqual(new Array(10).fill(7));
    expect(sameBytes(m.saveStateSync({ into: new Uint8Array(expected.byteLength) }), expected)).toBe(true);
    const short = await rejection(m.saveState({ into: new Uint8Array(expected.byteLength - 1) }));
    expect(short.code).toBe('INVALID_INPUT');
    expect(short.message).toContain(`at least ${expected.byteLength} bytes`);
    expect((await rejection(m.saveState({ into: [1, 2] as unknown as Uint8Array }))).code).toBe('INVALID_INPUT');
    await m.dispose();
  });

  it('restore into an idle module at once, and the bytes may change as soon as restoreState returns', async () => {
    const m = await Module.load(Program.load(kvBytes));
    await outputsOf(m, kvCalls.slice(0, SPLIT));
    const expected = await m.saveState();
    const after = await outputsOf(m, kvCalls.slice(SPLIT));
    const snapshot = expected.slice();
    const restored = m.restoreState(snapshot);
    snapshot.fill(0);
    await restored;
    expect(await outputsOf(m, kvCalls.slice(SPLIT))).toEqual(after);
    await m.dispose();
  });

  it("move a stream's RNN state between modules, synchronously too", async () => {
    const calls = gruStreamSession(GRU_STREAM_CONFIG, 5).filter((call) => call.method === 'step');
    const program = Program.load(gruBytes);
    const alone = await Module.load(program);
    const expected = await outputsOf(alone, calls);

    const a = await Module.load(program);
    await outputsOf(a, calls.slice(0, 2));
    const b = await Module.load(program);
    b.restoreStateSync(a.saveStateSync());
    expect(await outputsOf(b, calls.slice(2))).toEqual(expected.slice(2));
    await Promise.all([alone.dispose(), a.dispose(), b.dispose()]);
  });

  it('hand a session to another process that loads the same file', async () => {
    const file = path.join(dir, 'kv-decoder.pte');
    fs.writeFileSync(file, kvBytes);
    const m = await Module.load(file);
    await outputsOf(m, kvCalls.slice(0, SPLIT));
    fs.writeFileSync(path.join(dir, 'state.etss'), await m.saveState());
    const [expected] = await outputsOf(m, kvCalls.slice(SPLIT, SPLIT + 1));
    const next = kvCalls[SPLIT]!;
    fs.writeFileSync(
      path.join(dir, 'next.json'),
      JSON.stringify({
        method: next.method,
        inputs: next.inputs.map((t) => ({
          dtype: t.dtype,
          shape: t.shape,
          data: Array.from(t.data as ArrayLike<number | bigint>, (v) => (typeof v === 'bigint' ? String(v) : v)),
        })),
      }),
    );
    const script = `
      import fs from 'node:fs';
      import { Module, Tensor } from ${JSON.stringify(path.join(repoRoot, 'dist/index.js'))};
      const m = await Module.load(${JSON.stringify(file)});
      await m.restoreState(fs.readFileSync(${JSON.stringify(path.join(dir, 'state.etss'))}));
      const next = JSON.parse(fs.readFileSync(${JSON.stringify(path.join(dir, 'next.json'))}, 'utf8'));
      const outputs = await m.execute(next.method, next.inputs.map((t) => Tensor.from(t.dtype, t.shape, t.data)));
      console.log(JSON.stringify(outputs.map((t) => Array.from(t.data))));
      await m.dispose();
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
    expect(child.stderr).toBe('');
    expect(JSON.parse(child.stdout)).toEqual(expected);
    await m.dispose();
  });
});

/** Byte-for-byte equality of two large arrays (vitest's toEqual walks them element by element). */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.compare(a, b) === 0;
}

/** The arena bytes a snapshot carries, at their offsets (0 where it carries none), and its ranges. */
function unpack(snapshot: Uint8Array): { arena: Uint8Array; ranges: [number, number][] } {
  const view = new DataView(snapshot.buffer, snapshot.byteOffset, snapshot.byteLength);
  const arena = new Uint8Array(Number(view.getBigUint64(24, true)));
  const ranges: [number, number][] = [];
  let at = 40 + 16 * view.getUint32(32, true);
  for (let r = 0; r < view.getUint32(32, true); r++) {
    const offset = Number(view.getBigUint64(40 + 16 * r, true));
    const size = Number(view.getBigUint64(48 + 16 * r, true));
    arena.set(snapshot.subarray(at, at + size), offset);
    ranges.push([offset, size]);
    at += size;
  }
  return { arena, ranges };
}

describe('a partial snapshot', () => {
  it('carries only the ranges asked for, and restoring it writes those and leaves the rest', async () => {
    const program = Program.load(kvBytes);
    const a = await Module.load(program);
    const b = await Module.load(program);
    await outputsOf(a, kvCalls.slice(0, SPLIT));
    await outputsOf(b, kvCalls.slice(0, 1));
    const state = a.methodMeta('decode').state;
    expect(state.length).toBeGreaterThan(1);
    // The first half of the first state tensor, and the whole of the last.
    const first = state[0]!;
    const last = state[state.length - 1]!;
    const ranges: [number, number][] = [
      [first.offset, Math.floor(first.bytes / 2)],
      [last.offset, last.bytes],
    ];
    const partial = await a.saveState({ ranges });
    expect(partial.byteLength).toBe(40 + 16 * 2 + ranges[0]![1] + ranges[1]![1]);
    expect(unpack(partial).ranges).toEqual(ranges);

    const aState = unpack(await a.saveState()).arena;
    const bBefore = unpack(await b.saveState()).arena;
    await b.restoreState(partial);
    const bAfter = unpack(await b.saveState()).arena;
    const inRanges = (i: number): boolean => ranges.some(([offset, size]) => i >= offset && i < offset + size);
    let fromA = 0;
    const wrong: number[] = [];
    for (let i = 0; i < bAfter.length; i++) {
      if (bAfter[i] !== (inRanges(i) ? aState[i] : bBefore[i])) wrong.push(i);
      if (inRanges(i)) fromA++;
    }
    expect(wrong).toEqual([]);
    expect(fromA).toBe(ranges[0]![1] + ranges[1]![1]);
    // The ranges A's state and B's differ in, so the check above could fail.
    expect(sameBytes(aState.subarray(last.offset, last.offset + last.bytes), bBefore.subarray(last.offset, last.offset + last.bytes))).toBe(
      false,
    );
    expect(sameBytes(b.saveStateSync({ ranges }), partial)).toBe(true);
    await Promise.all([a.dispose(), b.dispose()]);
  });

  it('refuses ranges out of order, outside the state or not pairs of whole numbers', async () => {
    const m = await Module.load(Program.load(kvBytes));
    const arenaBytes = m.memoryReport().arenas.find((arena) => arena.memoryId === 2)!.bytes;
    const outside = await rejection(m.saveState({ ranges: [[arenaBytes - 4, 8]] }));
    expect(outside.message).toBe(`state snapshot: range 0 [${arenaBytes - 4}, +8) is out of order or outside the ${arenaBytes}-byte state`);
    const unordered = await rejection(
      m.saveState({
        ranges: [
          [64, 8],
          [0, 8],
        ],
      }),
    );
    expect(unordered.message).toMatch(/^state snapshot: range 1 \[0, \+8\) is out of order/);
    for (const ranges of [[[1.5, 2]], [[1]], [[-1, 2]], 'all'] as unknown[]) {
      const error = await rejection(m.saveState({ ranges } as never));
      expect(error.message).toMatch(/^saveState: ranges must be an array of \[offset, size\] pairs of whole numbers, got /);
    }
    expect((await rejection(m.saveState({ range: [] } as never))).message).toMatch(/^saveState: unknown option 'range'/);
    await m.dispose();
  });
});

describe('a snapshot that does not fit', () => {
  it('is refused whole, naming what is wrong, and leaves the state as it was', async () => {
    const m = await Module.load(Program.load(kvBytes));
    await outputsOf(m, kvCalls.slice(0, SPLIT));
    const before = await m.saveState();
    const gru = await Module.load(Program.load(gruBytes));
    const foreign = await gru.saveState();

    const cases: [Uint8Array, RegExp][] = [
      [foreign, /^state snapshot: saved from a program whose state is laid out differently/],
      [before.subarray(0, before.byteLength - 1), /^state snapshot: truncated: the ranges hold \d+ bytes, the snapshot carries \d+$/],
      [before.subarray(0, 20), /^state snapshot: 20 bytes is shorter than a snapshot's 40-byte header$/],
      [new Uint8Array(before.byteLength), /^state snapshot: the bytes do not start with 'ETSS'/],
    ];
    for (const [snapshot, message] of cases) {
      const error = await rejection(m.restoreState(snapshot));
      expect(error.code).toBe('INVALID_INPUT');
      expect(error.message).toMatch(message);
      expect(thrown(() => m.restoreStateSync(snapshot)).message).toMatch(message);
      expect(sameBytes(await m.saveState(), before)).toBe(true);
    }
    const notBytes = await rejection(m.restoreState('state' as unknown as Uint8Array));
    expect(notBytes.code).toBe('INVALID_INPUT');
    expect(notBytes.message).toBe("a state snapshot must be an ArrayBuffer or a view of one, got 'state'");
    await Promise.all([m.dispose(), gru.dispose()]);
  });

  it('from another program whose state sits at the same bytes is refused too', async () => {
    // The same Llama with one more constant method: the same state tensors at the same offsets.
    const metadata = { get_max_context_len: [LLAMA_8DA4W_CONFIG.context] };
    const saved = await Module.load(Program.load(llamaProgram(LLAMA_8DA4W_CONFIG, metadata)));
    const other = await Module.load(Program.load(llamaProgram(LLAMA_8DA4W_CONFIG, { ...metadata, get_bos_id: [1] })));
    expect(other.methodMeta('decode').state).toEqual(saved.methodMeta('decode').state);
    const error = await rejection(other.restoreState(await saved.saveState()));
    expect(error.message).toMatch(
      /^state snapshot: saved from another program with the same state layout \(program [0-9a-f]{16}, this module's [0-9a-f]{16}\)$/,
    );
    await Promise.all([saved.dispose(), other.dispose()]);
  });
});

describe('modules without one state', () => {
  it('a program without state saves and restores an empty snapshot', async () => {
    const m = await Module.load(testdataPath('et_add.pte'));
    const snapshot = await m.saveState();
    expect(snapshot.byteLength).toBe(40);
    await m.restoreState(snapshot);
    await m.dispose();
  });

  it('methods that each keep their own state are refused, naming the option', async () => {
    const m = await Module.load(Program.load(kvBytes), { shareMemoryArenas: false });
    const error = await rejection(m.saveState());
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toMatch(/methods keep a mem_id 2 state arena each \(shareMemoryArenas: false\)/);
    await m.dispose();
  });

  it('a disposed module, or one with calls queued, says so', async () => {
    const m = await Module.load(Program.load(gruBytes));
    const queued = m.execute('step', [Tensor.zeros('float32', [1, GRU_STREAM_CONFIG.frameSize])]);
    expect(thrown(() => m.saveStateSync()).message).toMatch(/^cannot save the state synchronously while 1 call\(s\) are queued/);
    await queued;
    const snapshot = m.saveStateSync();
    await m.dispose();
    expect((await rejection(m.saveState())).code).toBe('DISPOSED');
    expect((await rejection(m.restoreState(snapshot))).code).toBe('DISPOSED');
    expect(thrown(() => m.restoreStateSync(snapshot)).code).toBe('DISPOSED');
  });
});
