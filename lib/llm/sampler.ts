// Picks the next token from a row of logits. Greedy (temperature 0, or top-k
// 1) is an argmax over the row as it came from the method. Otherwise a list
// of logits processors runs over one sampling state, as transformers.js's
// LogitsProcessorList does: temperature writes the row's softmax weights once
// into a scratch array the sampler keeps, top-k and top-p narrow the
// candidates (indices into it), and a seeded draw picks among what is left.
// Each processor is a small unit; a new one (a penalty, min-p, a bias) is one
// more class and one more entry in the list `Sampler` builds.
import { EtnaError } from '../errors.js';
import { Mulberry32 } from '../random.js';

export interface SamplingOptions {
  /** 0 picks the most likely token (greedy); above 0 divides the logits before the softmax. */
  readonly temperature: number;
  /** Keep only the k most likely tokens (0: all). */
  readonly topK: number;
  /** Keep the most likely tokens whose probabilities add up to p (1: all). */
  readonly topP: number;
  /** Seeds the generator: the same seed and logits give the same tokens. */
  readonly seed: number;
}

/** The index of the largest value; a NaN counts as the largest, as in torch.argmax. */
export function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) {
    const value = row[i]!;
    if (Number.isNaN(value)) return Number.isNaN(row[best]!) ? best : i;
    if (value > row[best]!) best = i;
  }
  return best;
}

/**
 * What the processors of one draw share: the row, a weight per token and the
 * candidates still in the draw. The arrays are kept from one draw to the
 * next, so sampling allocates only when the vocabulary size changes.
 */
export class SamplingState {
  /** The logits row being sampled, as the method returned it. */
  logits: Float32Array = new Float32Array(0);
  /** One weight per token: exp((logit - max) / temperature), the softmax before it is normalised. */
  weights: Float32Array = new Float32Array(0);
  /** Whether every token is still a candidate; `ids` is then unused. */
  everyToken = true;
  /** The candidates are `ids[0..count)`. */
  ids: Uint32Array = new Uint32Array(0);
  count = 0;
  /** Whether `ids[0..count)` runs from the most likely token down (ties: the lower id first). */
  ordered = false;
  /** The candidates' weights added up: what the draw scales its uniform number to. */
  total = 0;

  get vocab(): number {
    return this.logits.length;
  }

  /** Starts a draw over `logits`: every token a candidate, no weights yet. */
  begin(logits: Float32Array): void {
    if (this.weights.length !== logits.length) {
      this.weights = new Float32Array(logits.length);
      this.ids = new Uint32Array(logits.length);
    }
    this.logits = logits;
    this.everyToken = true;
    this.count = logits.length;
    this.ordered = false;
    this.total = 0;
  }

  /** Narrows the candidates to `ids[0..count)`, in any order. */
  keep(count: number): void {
    this.everyToken = false;
    this.count = count;
    this.ordered = false;
  }

  /** Sorts the candidates most likely first (ties: the lower id), and adds their weights up in that order. */
  order(): void {
    if (this.ordered) return;
    const w = this.weights;
    const candidates = this.ids.subarray(0, this.count);
    candidates.sort((a, b) => w[b]! - w[a]! || a - b);
    let total = 0;
    for (let i = 0; i < candidates.length; i++) total += w[candidates[i]!]!;
    this.total = total;
    this.ordered = true;
  }
}

/** One step of the sampling pipeline: reweights the tokens or narrows the candidates. */
export interface LogitsProcessor {
  process(state: SamplingState): void;
}

/** Processors run in order over one state. */
export class LogitsProcessorList implements LogitsProcessor {
  constructor(readonly processors: readonly LogitsProcessor[]) {}

  process(state: SamplingState): void {
    for (const processor of this.processors) processor.process(state);
  }
}

/** softmax(logits / temperature), unnormalised, into the state's weights; refuses rows nothing can be drawn from. */
export class TemperatureProcessor implements LogitsProcessor {
  constructor(readonly temperature: number) {}

  process(state: SamplingState): void {
    const { logits, weights, vocab } = state;
    let max = -Infinity;
    for (let i = 0; i < vocab; i++) {
      const value = logits[i]!;
      if (Number.isNaN(value)) throw new EtnaError('INVALID_INPUT', `sampling: logit ${i} is NaN`);
      if (value > max) max = value;
    }
    if (max === -Infinity) throw new EtnaError('INVALID_INPUT', 'sampling: every logit is -Infinity');
    let total = 0;
    for (let i = 0; i < vocab; i++) {
      const weight = Math.exp((logits[i]! - max) / this.temperature);
      weights[i] = weight;
      total += weight;
    }
    state.total = total;
  }
}

/** Keeps the k most likely tokens (ties: the lower id); 0, or k at least the vocabulary, keeps all. */
export class TopKProcessor implements LogitsProcessor {
  constructor(readonly k: number) {}

  process(state: SamplingState): void {
    if (this.k <= 0 || this.k >= state.vocab || state.count <= this.k) return;
    if (!state.everyToken) {
      state.order();
      state.count = this.k;
      state.ordered = false;
    } else state.keep(this.keepTopK(state.weights, state.ids));
    state.order();
  }

  /**
   * Puts the k most likely tokens into `heap[0..k)`, in no particular order:
   * a min-heap of k indices over one pass, so top-k costs vocab * log k
   * instead of sorting the vocabulary.
   */
  private keepTopK(w: Float32Array, heap: Uint32Array): number {
    const k = this.k;
    // a ranks below b: less probable, or as probable with a higher id.
    const below = (a: number, b: number): boolean => w[a]! < w[b]! || (w[a] === w[b] && a > b);
    const swap = (i: number, j: number): void => {
      const t = heap[i]!;
      heap[i] = heap[j]!;
      heap[j] = t;
    };
    let size = 0;
    for (let id = 0; id < w.length; id++) {
      if (size < k) {
        heap[size] = id;
        for (let i = size++; i > 0 && below(heap[i]!, heap[(i - 1) >> 1]!); i = (i - 1) >> 1) swap(i, (i - 1) >> 1);
      } else if (below(heap[0]!, id)) {
        heap[0] = id;
        for (let i = 0; ; ) {
          const left = 2 * i + 1;
          const right = left + 1;
          let least = i;
          if (left < size && below(heap[left]!, heap[least]!)) least = left;
          if (right < size && below(heap[right]!, heap[least]!)) least = right;
          if (least === i) break;
          swap(i, least);
          i = least;
        }
      }
    }
    return size;
  }
}

/** Keeps the most likely tokens whose weights add up to p of the candidates' total (the nucleus); 1 keeps all. */
export class TopPProcessor implements LogitsProcessor {
  constructor(readonly p: number) {}

  process(state: SamplingState): void {
    if (this.p >= 1) return;
    if (state.everyToken) {
      // A token below (1 - p) / (vocab - 1) of the mass cannot be in the nucleus (ExecuTorch's sampler
      // cuts the same way), which keeps the sort short.
      const { weights, ids, vocab } = state;
      const cutoff = ((1 - this.p) / (vocab - 1)) * state.total;
      let count = 0;
      for (let i = 0; i < vocab; i++) if (weights[i]! >= cutoff) ids[count++] = i;
      // The cut holds when some token is above it; on a row flatter than p allows (p under 1 / vocab), none is.
      if (count === 0) for (; count < vocab; count++) ids[count] = count;
      state.keep(count);
    }
    state.order();
    const target = this.p * state.total;
    let running = 0;
    for (let i = 0; i < state.count; i++) {
      running += state.weights[state.ids[i]!]!;
      if (running >= target) {
        state.count = i + 1;
        state.total = running;
        return;
      }
    }
  }
}

export class Sampler {
  /** What runs before each draw: temperature, then top-k, then top-p. */
  readonly processors: LogitsProcessorList;
  private readonly random: Mulberry32;
  private readonly state = new SamplingState();

  constructor(readonly options: SamplingOptions) {
    this.random = new Mulberry32(options.seed);
    this.processors = new LogitsProcessorList([
      new TemperatureProcessor(options.temperature),
      new TopKProcessor(options.topK),
      new TopPProcessor(options.topP),
    ]);
  }

  get greedy(): boolean {
    return this.options.temperature === 0 || this.options.topK === 1;
  }

  sample(row: Float32Array): number {
    if (this.greedy) return argmax(row);
    this.state.begin(row);
    this.processors.process(this.state);
    return this.draw(this.state);
  }

  /** A candidate with probability its weight over the total, from one uniform number. */
  private draw(state: SamplingState): number {
    const { weights, ids, count } = state;
    let r = this.random.next() * state.total;
    if (state.everyToken) {
      // Rounding can leave r just above zero at the end: the last token with any weight takes it.
      let last = 0;
      for (let i = 0; i < weights.length; i++) {
        if (weights[i]! > 0) last = i;
        r -= weights[i]!;
        if (r < 0) return i;
      }
      return last;
    }
    for (let i = 0; i < count; i++) {
      r -= weights[ids[i]!]!;
      if (r < 0) return ids[i]!;
    }
    return ids[count - 1]!;
  }
}
