// The sampler as one function, as it was before it became a list of logits
// processors: the reference the composed sampler must match draw for draw
// (test/llm/sampler.test.ts). Only the generator's import changed.
import { EtnaError } from '../../lib/errors.js';
import { argmax, type SamplingOptions } from '../../lib/llm/sampler.js';
import { Mulberry32 } from '../../lib/random.js';

export class MonolithicSampler {
  private readonly random: Mulberry32;
  private probabilities: Float32Array = new Float32Array(0);
  private order: Uint32Array = new Uint32Array(0);

  constructor(readonly options: SamplingOptions) {
    this.random = new Mulberry32(options.seed);
  }

  get greedy(): boolean {
    return this.options.temperature === 0 || this.options.topK === 1;
  }

  sample(row: Float32Array): number {
    if (this.greedy) return argmax(row);
    const vocab = row.length;
    if (this.probabilities.length !== vocab) {
      this.probabilities = new Float32Array(vocab);
      this.order = new Uint32Array(vocab);
    }
    const p = this.probabilities;
    let max = -Infinity;
    for (let i = 0; i < vocab; i++) {
      const value = row[i]!;
      if (Number.isNaN(value)) throw new EtnaError('INVALID_INPUT', `sampling: logit ${i} is NaN`);
      if (value > max) max = value;
    }
    if (max === -Infinity) throw new EtnaError('INVALID_INPUT', 'sampling: every logit is -Infinity');
    const { temperature, topK, topP } = this.options;
    let total = 0;
    for (let i = 0; i < vocab; i++) {
      const weight = Math.exp((row[i]! - max) / temperature);
      p[i] = weight;
      total += weight;
    }
    const keepK = topK > 0 && topK < vocab;
    if (!keepK && topP >= 1) return this.draw(p, total);
    // Candidates: with top-p alone, tokens below (1 - p) / (vocab - 1) of the mass cannot be in the nucleus
    // (ExecuTorch's sampler cuts the same way), which keeps the sort short.
    let count = 0;
    if (keepK) count = this.keepTopK(p, topK);
    else {
      const cutoff = ((1 - topP) / (vocab - 1)) * total;
      for (let i = 0; i < vocab; i++) if (p[i]! >= cutoff) this.order[count++] = i;
    }
    const candidates = this.order.subarray(0, count);
    candidates.sort((a, b) => p[b]! - p[a]! || a - b);
    let kept = keepK ? Math.min(topK, count) : count;
    let mass = 0;
    for (let i = 0; i < kept; i++) mass += p[candidates[i]!]!;
    if (topP < 1) {
      const target = topP * mass;
      let running = 0;
      for (let i = 0; i < kept; i++) {
        running += p[candidates[i]!]!;
        if (running >= target) {
          kept = i + 1;
          mass = running;
          break;
        }
      }
    }
    let r = this.random.next() * mass;
    for (let i = 0; i < kept; i++) {
      r -= p[candidates[i]!]!;
      if (r < 0) return candidates[i]!;
    }
    return candidates[kept - 1]!;
  }

  /**
   * Puts the k most likely tokens (ties: the lower id) into `order[0..k)`, in
   * no particular order: a min-heap of k indices over one pass, so top-k
   * costs vocab * log k instead of sorting the vocabulary.
   */
  private keepTopK(p: Float32Array, k: number): number {
    const heap = this.order;
    // a ranks below b: less probable, or as probable with a higher id.
    const below = (a: number, b: number): boolean => p[a]! < p[b]! || (p[a] === p[b] && a > b);
    const swap = (i: number, j: number): void => {
      const t = heap[i]!;
      heap[i] = heap[j]!;
      heap[j] = t;
    };
    let size = 0;
    for (let id = 0; id < p.length; id++) {
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

  private draw(weights: Float32Array, total: number): number {
    let r = this.random.next() * total;
    let last = 0;
    for (let i = 0; i < weights.length; i++) {
      if (weights[i]! > 0) last = i;
      r -= weights[i]!;
      if (r < 0) return i;
    }
    return last;
  }
}
