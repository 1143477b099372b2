// A reference for the sampling controls, written from their definitions in
// plain float64 loops, for tests to compare the sampler with: llama.cpp's
// chain (logit bias, penalties, then top-k, top-p and min-p; min-p reads the
// logits before temperature) with etna's temperature before top-k and top-p,
// llama.cpp's repeat penalty, OpenAI's frequency and presence penalties and
// its logprobs (the log-softmax of the model's logits).

export interface Controls {
  temperature: number;
  topK?: number;
  topP?: number;
  minP?: number;
  repetitionPenalty?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  penaltyLastN?: number;
  logitBias?: Record<number, number>;
}

/** The logits after the bias, then the penalties over the window of `context`. */
export function referenceLogits(row: Float32Array, c: Controls, context: readonly number[]): number[] {
  const logits = Array.from(row);
  for (const [id, bias] of Object.entries(c.logitBias ?? {})) if (Number(id) < logits.length) logits[Number(id)]! += bias;
  const lastN = c.penaltyLastN ?? 64;
  const window = lastN === -1 ? context : lastN === 0 ? [] : context.slice(Math.max(context.length - lastN, 0));
  const counts = new Map<number, number>();
  for (const id of window) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const [id, count] of counts) {
    let logit = logits[id]!;
    const repetition = c.repetitionPenalty ?? 1;
    logit = logit > 0 ? logit / repetition : logit * repetition;
    logits[id] = logit - count * (c.frequencyPenalty ?? 0) - (c.presencePenalty ?? 0);
  }
  return logits;
}

/**
 * What a draw picks from: softmax(logits / T), the k most likely, the most
 * likely reaching p of what is left, then min-p on the logits (before
 * temperature, as llama.cpp's chain has it), renormalised.
 */
export function referenceDistribution(row: Float32Array, c: Controls, context: readonly number[]): Map<number, number> {
  const logits = referenceLogits(row, c, context);
  const max = Math.max(...logits);
  const weights = logits.map((logit) => Math.exp((logit - max) / c.temperature));
  let ids = logits.map((_, id) => id).sort((a, b) => weights[b]! - weights[a]! || a - b);
  if ((c.topK ?? 0) > 0) ids = ids.slice(0, c.topK);
  const kept = ids.reduce((sum, id) => sum + weights[id]!, 0);
  let running = 0;
  const nucleus: number[] = [];
  for (const id of ids) {
    nucleus.push(id);
    running += weights[id]!;
    if (running >= (c.topP ?? 1) * kept) break;
  }
  const survivors = nucleus.filter((id) => logits[id]! >= max + Math.log(c.minP ?? 0));
  const total = survivors.reduce((sum, id) => sum + weights[id]!, 0);
  return new Map(survivors.map((id) => [id, weights[id]! / total]));
}

/** log softmax of the row as the method returned it. */
export function referenceLogSoftmax(row: Float32Array): number[] {
  const max = Math.max(...row);
  const logSum = Math.log(Array.from(row).reduce((sum, logit) => sum + Math.exp(logit - max), 0));
  return Array.from(row, (logit) => logit - max - logSum);
}
