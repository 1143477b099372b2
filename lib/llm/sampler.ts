// Picks the next token from a row of logits. A list of logits processors
// runs over one sampling state, as transformers.js's LogitsProcessorList
// does: a logit bias and the repetition penalties change a copy of the row
// (only when asked for, so the row is otherwise read as the method returned
// it), temperature writes the row's softmax weights once into a scratch
// array the sampler keeps, top-k, top-p and min-p narrow the candidates
// (indices into it), and a seeded draw picks among what is left. Greedy
// (temperature 0, or top-k 1) is an argmax over the row after the bias and
// the penalties. Each processor is a small unit; a new one is one more class
// and one more entry in the list `Sampler` builds.
import { EtnaError } from '../errors.js';
import { Mulberry32 } from '../random.js';

/** Tokens of the context the penalties count by default: llama.cpp's `penalty_last_n`. */
export const DEFAULT_PENALTY_LAST_N = 64;

export interface SamplingOptions {
  /** 0 picks the most likely token (greedy); above 0 divides the logits before the softmax. */
  readonly temperature: number;
  /** Keep only the k most likely tokens (0: all). */
  readonly topK: number;
  /** Keep the most likely tokens whose probabilities add up to p (1: all). */
  readonly topP: number;
  /** Seeds the generator: the same seed and logits give the same tokens. */
  readonly seed: number;
  /** Keep the tokens whose probability is at least minP times the most likely one's, before temperature (0, the default: all). */
  readonly minP?: number;
  /** Divides the positive logits (multiplies the negative ones) of tokens in the window, as llama.cpp's repeat penalty (1: off). */
  readonly repetitionPenalty?: number;
  /** Subtracted from a token's logit once per occurrence in the window, as OpenAI's frequency_penalty (0: off). */
  readonly frequencyPenalty?: number;
  /** Subtracted from the logit of every token in the window, as OpenAI's presence_penalty (0: off). */
  readonly presencePenalty?: number;
  /** The window: the last N tokens `accept()` was given (-1: all of them; 0: no penalties). Default 64. */
  readonly penaltyLastN?: number;
  /** Added to the logits of these token ids before anything else, as OpenAI's logit_bias. */
  readonly logitBias?: ReadonlyMap<number, number>;
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
 * Puts the k largest of `values` into `out[0..k)`, in no particular order
 * (ties: the lower index ranks higher): a min-heap of k indices over one
 * pass, so it costs length * log k instead of sorting. Returns how many it
 * put (k, or the length when shorter).
 */
export function largest(values: Float32Array, k: number, out: Uint32Array): number {
  // a ranks below b: smaller, or as large with a higher index.
  const below = (a: number, b: number): boolean => values[a]! < values[b]! || (values[a] === values[b] && a > b);
  const swap = (i: number, j: number): void => {
    const t = out[i]!;
    out[i] = out[j]!;
    out[j] = t;
  };
  let size = 0;
  for (let id = 0; id < values.length; id++) {
    if (size < k) {
      out[size] = id;
      for (let i = size++; i > 0 && below(out[i]!, out[(i - 1) >> 1]!); i = (i - 1) >> 1) swap(i, (i - 1) >> 1);
    } else if (below(out[0]!, id)) {
      out[0] = id;
      for (let i = 0; ; ) {
        const left = 2 * i + 1;
        const right = left + 1;
        let least = i;
        if (left < size && below(out[left]!, out[least]!)) least = left;
        if (right < size && below(out[right]!, out[least]!)) least = right;
        if (least === i) break;
        swap(i, least);
        i = least;
      }
    }
  }
  return size;
}

/**
 * What the processors of one draw share: the row, a weight per token and the
 * candidates still in the draw. The arrays are kept from one draw to the
 * next, so sampling allocates only when the vocabulary size changes.
 */
export class SamplingState {
  /** The logits row being sampled: the method's, or the state's copy of it once a processor changed it. */
  logits: Float32Array = new Float32Array(0);
  /** The largest logit, once temperature has run (min-p cuts below it). */
  maxLogit = -Infinity;
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

  // The copy a processor changes, so the caller's row stays as the method returned it.
  private copy: Float32Array = new Float32Array(0);
  private copied = false;

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
    this.copied = false;
    this.maxLogit = -Infinity;
    this.everyToken = true;
    this.count = logits.length;
    this.ordered = false;
    this.total = 0;
  }

  /** The row to change in place: a copy of the method's, made at the first call of a draw. */
  editableLogits(): Float32Array {
    if (!this.copied) {
      if (this.copy.length !== this.logits.length) this.copy = new Float32Array(this.logits.length);
      this.copy.set(this.logits);
      this.logits = this.copy;
      this.copied = true;
    }
    return this.logits;
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
    state.maxLogit = max;
    let total = 0;
    if (max === Infinity) {
      // The limit of the softmax as those logits grow: the +Infinity tokens share the whole probability.
      for (let i = 0; i < vocab; i++) {
        const weight = logits[i] === Infinity ? 1 : 0;
        weights[i] = weight;
        total += weight;
      }
    } else {
      for (let i = 0; i < vocab; i++) {
        const weight = Math.exp((logits[i]! - max) / this.temperature);
        weights[i] = weight;
        total += weight;
      }
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
    } else state.keep(largest(state.weights, this.k, state.ids));
    state.order();
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

/**
 * Keeps the candidates whose probability before temperature is at least p
 * times the most likely token's, as llama.cpp's min-p: a logit at least the
 * largest plus ln p. It runs after top-k and top-p, as in llama.cpp's chain,
 * and reads the logits, so temperature does not move its cut.
 */
export class MinPProcessor implements LogitsProcessor {
  constructor(readonly p: number) {}

  process(state: SamplingState): void {
    if (this.p <= 0) return;
    const cut = state.maxLogit + Math.log(this.p);
    const { logits, weights, ids } = state;
    let count = 0;
    let total = 0;
    if (state.everyToken) {
      for (let id = 0; id < logits.length; id++) {
        if (logits[id]! >= cut) {
          ids[count++] = id;
          total += weights[id]!;
        }
      }
      state.keep(count);
    } else {
      // Filtering keeps the candidates' order, so an ordered list stays ordered.
      for (let i = 0; i < state.count; i++) {
        const id = ids[i]!;
        if (logits[id]! >= cut) {
          ids[count++] = id;
          total += weights[id]!;
        }
      }
      state.count = count;
    }
    state.total = total;
  }
}

/** Adds a bias to the logits of some tokens, as OpenAI's logit_bias; ids past the row are left out. */
export class LogitBiasProcessor implements LogitsProcessor {
  private readonly ids: number[];
  private readonly biases: number[];

  constructor(bias: ReadonlyMap<number, number>) {
    this.ids = [...bias.keys()];
    this.biases = [...bias.values()];
  }

  process(state: SamplingState): void {
    const logits = state.editableLogits();
    for (let i = 0; i < this.ids.length; i++) {
      const id = this.ids[i]!;
      if (id < logits.length) logits[id]! += this.biases[i]!;
    }
  }
}

/**
 * The last `size` tokens accepted, and how often each occurs among them: what
 * the penalties count. A size of -1 keeps every token accepted.
 */
export class TokenWindow {
  /** Token id to its occurrences in the window. */
  readonly counts = new Map<number, number>();
  // The window's tokens in a ring, oldest at `next` once it is full; unused for size -1.
  private readonly ring: Uint32Array;
  private next = 0;
  private filled = 0;

  constructor(readonly size: number) {
    this.ring = new Uint32Array(Math.max(size, 0));
  }

  /** Adds tokens in order; only the last `size` of them can stay. */
  push(tokens: readonly number[]): void {
    const from = this.size < 0 ? 0 : Math.max(tokens.length - this.size, 0);
    for (let i = from; i < tokens.length; i++) this.pushOne(tokens[i]!);
  }

  private pushOne(token: number): void {
    this.counts.set(token, (this.counts.get(token) ?? 0) + 1);
    if (this.size < 0) return;
    if (this.filled === this.size) {
      const old = this.ring[this.next]!;
      const left = this.counts.get(old)! - 1;
      if (left === 0) this.counts.delete(old);
      else this.counts.set(old, left);
    } else this.filled++;
    this.ring[this.next] = token;
    this.next = (this.next + 1) % this.size;
  }
}

export interface Penalties {
  readonly repetition: number;
  readonly frequency: number;
  readonly presence: number;
}

/**
 * llama.cpp's penalties sampler over a token window: for each token in it, a
 * positive logit is divided by the repetition penalty and a negative one
 * multiplied by it, then count * frequency + presence is subtracted, as
 * OpenAI defines its frequency and presence penalties.
 */
export class PenaltyProcessor implements LogitsProcessor {
  constructor(
    readonly window: TokenWindow,
    readonly penalties: Penalties,
  ) {}

  process(state: SamplingState): void {
    if (this.window.counts.size === 0) return;
    const { repetition, frequency, presence } = this.penalties;
    const logits = state.editableLogits();
    for (const [id, count] of this.window.counts) {
      if (id >= logits.length) continue;
      let logit = logits[id]!;
      if (repetition !== 1) logit = logit <= 0 ? logit * repetition : logit / repetition;
      logits[id] = logit - (count * frequency + presence);
    }
  }
}

/** The candidates of a draw, most likely first (ties: the lower id), with their probabilities. */
export interface Candidates {
  readonly ids: number[];
  readonly probabilities: number[];
}

export class Sampler {
  /**
   * What runs before each draw: the logit bias, the penalties, temperature,
   * top-k, top-p, then min-p; a processor whose option leaves everything as
   * it is (no bias, no penalty, min-p 0) is not in the list.
   */
  readonly processors: LogitsProcessorList;
  /** The processors that change logits (bias, penalties): greedy decoding runs these, then an argmax. */
  private readonly edits: LogitsProcessorList;
  private readonly window: TokenWindow | undefined;
  private readonly random: Mulberry32;
  private readonly state = new SamplingState();

  constructor(readonly options: SamplingOptions) {
    this.random = new Mulberry32(options.seed);
    const edits: LogitsProcessor[] = [];
    if (options.logitBias !== undefined && options.logitBias.size > 0) edits.push(new LogitBiasProcessor(options.logitBias));
    const penalties: Penalties = {
      repetition: options.repetitionPenalty ?? 1,
      frequency: options.frequencyPenalty ?? 0,
      presence: options.presencePenalty ?? 0,
    };
    const lastN = options.penaltyLastN ?? DEFAULT_PENALTY_LAST_N;
    if (lastN !== 0 && (penalties.repetition !== 1 || penalties.frequency !== 0 || penalties.presence !== 0)) {
      this.window = new TokenWindow(lastN);
      edits.push(new PenaltyProcessor(this.window, penalties));
    }
    this.edits = new LogitsProcessorList(edits);
    const minP = options.minP ?? 0;
    this.processors = new LogitsProcessorList([
      ...edits,
      new TemperatureProcessor(options.temperature),
      new TopKProcessor(options.topK),
      new TopPProcessor(options.topP),
      ...(minP > 0 ? [new MinPProcessor(minP)] : []),
    ]);
  }

  get greedy(): boolean {
    return this.options.temperature === 0 || this.options.topK === 1;
  }

  /**
   * Tokens of the context, in order: the prompt's, then each generated one.
   * The penalties count the last `penaltyLastN` of them; without penalties
   * nothing is kept.
   */
  accept(tokens: number | readonly number[]): void {
    this.window?.push(typeof tokens === 'number' ? [tokens] : tokens);
  }

  sample(row: Float32Array): number {
    if (this.greedy) return this.argmax(row);
    this.state.begin(row);
    this.processors.process(this.state);
    return this.draw(this.state);
  }

  /** What the next `sample(row)` would draw from, without drawing: its candidates and their probabilities. */
  candidates(row: Float32Array): Candidates {
    if (this.greedy) return { ids: [this.argmax(row)], probabilities: [1] };
    const state = this.state;
    state.begin(row);
    this.processors.process(state);
    if (state.everyToken) {
      for (let id = 0; id < state.vocab; id++) state.ids[id] = id;
      const total = state.total;
      state.keep(state.vocab);
      state.total = total;
    }
    state.order();
    const ids = Array.from(state.ids.subarray(0, state.count));
    return { ids, probabilities: ids.map((id) => state.weights[id]! / state.total) };
  }

  // Greedy: the argmax of the row after the bias and the penalties, reading the method's row when there are none.
  private argmax(row: Float32Array): number {
    if (this.edits.processors.length === 0) return argmax(row);
    this.state.begin(row);
    this.edits.process(this.state);
    return argmax(this.state.logits);
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
