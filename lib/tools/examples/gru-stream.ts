// A streaming GRU whose hidden state lives in a shared buffer:
//   step(frame float32[1,16]) -> output float32[1,8]   (reads and updates the state)
//   reset()                                             (restores the initial state)
// The hidden state has an initial value (a learned h0), so it is serialized as
// a mutable-data entry; reset() copies the same values back from a constant.
import { ProgramBuilder } from '../../export/program-builder.js';
import {
  float32Tensor,
  linearRows,
  randomLinear,
  resetMethod,
  MethodTableReference,
  SeededRandom,
  sigmoid,
  type ExampleCall,
  type LinearWeights,
  type ReferenceMethod,
} from './reference.js';

export const GRU_STREAM_CONFIG = {
  frameSize: 16,
  hiddenSize: 32,
  outputSize: 8,
  seed: 0x6772_7573,
} as const;

const C = GRU_STREAM_CONFIG;

export interface GruStreamWeights {
  /** Gates r, z, n stacked: [3*hidden, frame]. */
  readonly input: LinearWeights;
  /** Gates r, z, n stacked: [3*hidden, hidden]. */
  readonly recurrent: LinearWeights;
  readonly readout: LinearWeights;
  readonly initialHidden: Float32Array;
}

export function createGruStreamWeights(seed: number = C.seed): GruStreamWeights {
  const random = new SeededRandom(seed);
  return {
    input: randomLinear(random, C.frameSize, 3 * C.hiddenSize),
    recurrent: randomLinear(random, C.hiddenSize, 3 * C.hiddenSize),
    readout: randomLinear(random, C.hiddenSize, C.outputSize),
    initialHidden: random.uniform(C.hiddenSize, 0.5),
  };
}

export function buildGruStream(weights: GruStreamWeights = createGruStreamWeights()): ProgramBuilder {
  const program = new ProgramBuilder();
  const H = C.hiddenSize;
  const constant = (name: string, w: LinearWeights) => ({
    weight: program.constant(`${name}.weight`, 'float32', [w.outFeatures, w.inFeatures], w.weight),
    bias: program.constant(`${name}.bias`, 'float32', [w.outFeatures], w.bias),
  });
  const input = constant('gru.input', weights.input);
  const recurrent = constant('gru.recurrent', weights.recurrent);
  const readout = constant('readout', weights.readout);
  const initialHidden = program.constant('gru.initial_hidden', 'float32', [1, H], weights.initialHidden);
  const hidden = program.sharedBuffer('gru.hidden', 'float32', [1, H], weights.initialHidden);

  program.method('step', (m) => {
    const frame = m.input('frame', 'float32', [1, C.frameSize]);
    const gi = m.linear(frame, input.weight, input.bias); // [1, 3H]
    const gh = m.linear(hidden, recurrent.weight, recurrent.bias); // [1, 3H]
    const gate = (g: typeof gi, k: number) => m.slice(g, 1, k * H, (k + 1) * H);
    const r = m.sigmoid(m.add(gate(gi, 0), gate(gh, 0)));
    const z = m.sigmoid(m.add(gate(gi, 1), gate(gh, 1)));
    const n = m.tanh(m.add(gate(gi, 2), m.mul(r, gate(gh, 2))));
    // (1 - z) * n + z * h, written as n + z * (h - n).
    const next = m.add(n, m.mul(z, m.sub(hidden, n)));
    m.copyInto(hidden, next);
    m.output({ output: m.linear(next, readout.weight, readout.bias) });
  });
  program.method('reset', (m) => {
    m.copyInto(hidden, initialHidden);
  });
  return program;
}

export class GruStreamReference extends MethodTableReference {
  readonly example = 'gru-stream';
  protected readonly signatures: Readonly<Record<string, ReferenceMethod>> = {
    step: {
      inputs: [{ name: 'frame', dtype: 'float32', shape: [1, C.frameSize] }],
      run: ([frame]) => [float32Tensor([1, C.outputSize], this.step(frame!.data as Float32Array))],
    },
    reset: resetMethod(() => this.reset()),
  };
  private hidden: Float32Array;

  constructor(readonly weights: GruStreamWeights = createGruStreamWeights()) {
    super();
    this.hidden = weights.initialHidden.slice();
  }

  /** A copy of the current hidden state. */
  get state(): Float32Array {
    return this.hidden.slice();
  }

  step(frame: Float32Array): Float32Array {
    const H = C.hiddenSize;
    const gi = linearRows(frame, 1, this.weights.input);
    const gh = linearRows(this.hidden, 1, this.weights.recurrent);
    const next = new Float32Array(H);
    for (let i = 0; i < H; i++) {
      const r = Math.fround(sigmoid(Math.fround(gi[i]! + gh[i]!)));
      const z = Math.fround(sigmoid(Math.fround(gi[H + i]! + gh[H + i]!)));
      const n = Math.fround(Math.tanh(Math.fround(gi[2 * H + i]! + Math.fround(r * gh[2 * H + i]!))));
      next[i] = n + Math.fround(z * Math.fround(this.hidden[i]! - n));
    }
    this.hidden = next;
    return linearRows(next, 1, this.weights.readout);
  }

  reset(): void {
    this.hidden = this.weights.initialHidden.slice();
  }

  session(): ExampleCall[] {
    return gruStreamSession();
  }
}

/** reset, five frames, reset, the first two frames again. */
export function gruStreamSession(seed = 11): ExampleCall[] {
  const random = new SeededRandom(seed);
  const frames = Array.from({ length: 5 }, () => float32Tensor([1, C.frameSize], random.uniform(C.frameSize, 1)));
  const step = (i: number): ExampleCall => ({ method: 'step', inputs: [frames[i]!] });
  return [{ method: 'reset', inputs: [] }, step(0), step(1), step(2), step(3), step(4), { method: 'reset', inputs: [] }, step(0), step(1)];
}
