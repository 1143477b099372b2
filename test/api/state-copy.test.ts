// One module's state copied straight into another's (Module.copyStateTo):
// the target goes on as the source would have, only the ranges asked for
// are written, the copy keeps each module's call order, and a target that
// cannot take the state is refused with its state unchanged.
import { describe, expect, it } from 'vitest';

import { Module, Program, Tensor } from '../../lib/index.js';
import { exportExample, GRU_STREAM_CONFIG, KV_DECODER_CONFIG, kvDecoderSession } from '../../lib/tools/examples/index.js';
import { buildKvDecoder, createKvDecoderWeights } from '../../lib/tools/examples/kv-decoder.js';
import { LLAMA_8DA4W_CONFIG } from '../../lib/tools/examples/llama-8da4w.js';
import { outputsOf } from '../helpers/example-calls.js';
import { rejection } from '../helpers/errors.js';
import { llamaProgram } from '../llm/helpers.js';

const kvBytes = exportExample('kv-decoder', { xnnpack: true });
const gruBytes = exportExample('gru-stream');
const kvCalls = kvDecoderSession(KV_DECODER_CONFIG, 11).filter((call) => call.method !== 'reset');
const SPLIT = Math.floor(kvCalls.length / 2);

const same = (a: Uint8Array, b: Uint8Array): boolean => Buffer.compare(a, b) === 0;

describe('copyStateTo', () => {
  it('continues a session in another module exactly as it would have gone on, and the source goes on too', async () => {
    const program = Program.load(kvBytes);
    const reference = await Module.load(program);
    const uninterrupted = await outputsOf(reference, kvCalls);
    const source = await Module.load(program);
    const target = await Module.load(program);
    // The target first holds a state of its own, which the copy replaces.
    await outputsOf(target, kvCalls.slice(0, 2));
    await outputsOf(source, kvCalls.slice(0, SPLIT));
    await source.copyStateTo(target);
    expect(same(await target.saveState(), await source.saveState())).toBe(true);
    expect(await outputsOf(target, kvCalls.slice(SPLIT))).toEqual(uninterrupted.slice(SPLIT));
    expect(await outputsOf(source, kvCalls.slice(SPLIT))).toEqual(uninterrupted.slice(SPLIT));
    await Promise.all([reference.dispose(), source.dispose(), target.dispose()]);
    program.dispose();
  });

  it('writes only the ranges asked for', async () => {
    const program = Program.load(kvBytes);
    const source = await Module.load(program);
    const target = await Module.load(program);
    await outputsOf(source, kvCalls.slice(0, SPLIT));
    await outputsOf(target, kvCalls.slice(0, 1));
    const [tensor] = source.methodMeta('decode').state;
    const half = Math.floor(tensor!.bytes / 2);
    const copied: [number, number] = [tensor!.offset, half];
    const kept: [number, number] = [tensor!.offset + half, tensor!.bytes - half];
    const keptBefore = await target.saveState({ ranges: [kept] });
    await source.copyStateTo(target, { ranges: [copied] });
    expect(same(await target.saveState({ ranges: [copied] }), await source.saveState({ ranges: [copied] }))).toBe(true);
    expect(same(await target.saveState({ ranges: [kept] }), keptBefore)).toBe(true);
    await Promise.all([source.dispose(), target.dispose()]);
  });

  it("copies after the source's earlier calls, and the target's later calls wait for it", async () => {
    const program = Program.load(kvBytes);
    const reference = await Module.load(program);
    const uninterrupted = await outputsOf(reference, kvCalls);
    const source = await Module.load(program);
    const target = await Module.load(program);
    const before = kvCalls.slice(0, SPLIT).map((call) => source.execute(call.method, call.inputs));
    const copied = source.copyStateTo(target);
    // Queued now, run after the copy.
    const after = kvCalls.slice(SPLIT).map((call) => target.execute(call.method, call.inputs));
    await Promise.all([...before, copied]);
    const outputs = (await Promise.all(after)).map((values) => values.map((value) => Array.from((value as Tensor).data as Float32Array)));
    expect(outputs).toEqual(uninterrupted.slice(SPLIT));
    await Promise.all([reference.dispose(), source.dispose(), target.dispose()]);
  });

  it('refuses a target of another program, itself, a busy or disposed target and bad ranges; the target keeps its state', async () => {
    const source = await Module.load(Program.load(kvBytes));
    await outputsOf(source, kvCalls.slice(0, SPLIT));
    const gru = await Module.load(Program.load(gruBytes));
    await gru.execute('step', [Tensor.float32([1, GRU_STREAM_CONFIG.frameSize], new Array(GRU_STREAM_CONFIG.frameSize).fill(0.5))]);
    const gruState = await gru.saveState();
    const other = await rejection(source.copyStateTo(gru));
    expect(other.code).toBe('INVALID_INPUT');
    expect(other.message).toMatch(/^copyStateTo: the target module's state is laid out otherwise/);
    expect(same(await gru.saveState(), gruState)).toBe(true);

    // Another program whose state sits at the same bytes.
    const metadata = { get_max_context_len: [LLAMA_8DA4W_CONFIG.context] };
    const llama = await Module.load(Program.load(llamaProgram(LLAMA_8DA4W_CONFIG, metadata)));
    const twin = await Module.load(Program.load(llamaProgram(LLAMA_8DA4W_CONFIG, { ...metadata, get_bos_id: [1] })));
    expect(twin.methodMeta('decode').state).toEqual(llama.methodMeta('decode').state);
    expect((await rejection(llama.copyStateTo(twin))).message).toMatch(/laid out otherwise/);

    expect((await rejection(source.copyStateTo(source))).message).toBe('copyStateTo: the target is this module');
    expect((await rejection(source.copyStateTo({} as Module))).code).toBe('INVALID_INPUT');
    const target = await Module.load(source.program);
    const busy = target.execute(kvCalls[0]!.method, kvCalls[0]!.inputs);
    expect((await rejection(source.copyStateTo(target))).message).toMatch(/^copyStateTo: the target module has 1 call\(s\) in flight/);
    await busy;
    const outside = await rejection(source.copyStateTo(target, { ranges: [[0, 1e12]] }));
    expect(outside.code).toBe('INVALID_INPUT');
    expect((await rejection(source.copyStateTo(target, { ranges: [[-1, 2]] }))).message).toMatch(/^copyStateTo: ranges must be/);
    expect((await rejection(source.copyStateTo(target, { into: new Uint8Array(1) } as object))).code).toBe('INVALID_INPUT');
    await target.dispose();
    expect((await rejection(source.copyStateTo(target))).code).toBe('DISPOSED');
    await Promise.all([source.dispose(), gru.dispose(), llama.dispose(), twin.dispose()]);
    expect((await rejection(source.copyStateTo(gru))).code).toBe('DISPOSED');
  });
});

describe('populateState', () => {
  it('faults in the pages under the ranges and leaves their bytes; bad ranges and a disposed module are refused', async () => {
    // Eight layers: an 8 MiB state, whose first and last tensors lie in different huge pages.
    const program = Program.load(
      buildKvDecoder(createKvDecoderWeights({ ...KV_DECODER_CONFIG, layers: 8 })).export({ xnnpack: true }).bytes,
    );
    const source = await Module.load(program, { shareMemoryArenas: true });
    await outputsOf(source, kvCalls.slice(0, 3));
    const state = source.methodMeta('decode').state;
    const first: [number, number] = [state[0]!.offset, state[0]!.bytes];
    const last: [number, number] = [state.at(-1)!.offset, state.at(-1)!.bytes];
    const held = await source.saveState({ ranges: [first] });
    // Two modules holding the same state, its first tensor written; one of them will be populated.
    const [module, reference] = await Promise.all([0, 1].map(() => Module.load(program, { shareMemoryArenas: true })));
    await Promise.all([module!.restoreState(held), reference!.restoreState(held)]);
    const untouched = module!.memoryReport().untouchedBytes;
    await module!.populateState({ ranges: [last] });
    const afterLast = module!.memoryReport().untouchedBytes;
    expect(afterLast).toBeLessThanOrEqual(untouched - last[1]);
    await module!.populateState();
    expect(module!.memoryReport().untouchedBytes).toBeLessThan(afterLast);
    expect(same(await module!.saveState(), await reference!.saveState())).toBe(true);
    expect(same(await module!.saveState({ ranges: [first] }), held)).toBe(true);

    expect((await rejection(module!.populateState({ ranges: [[0, 1e12]] }))).code).toBe('INVALID_INPUT');
    expect((await rejection(module!.populateState({ ranges: [[-1, 2]] }))).message).toMatch(/^populateState: ranges must be/);
    await Promise.all([source.dispose(), module!.dispose(), reference!.dispose()]);
    expect((await rejection(module!.populateState())).code).toBe('DISPOSED');
    program.dispose();
  });
});
