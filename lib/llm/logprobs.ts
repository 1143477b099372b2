// Log-probabilities of generated tokens, as OpenAI's `logprobs` and
// `top_logprobs` give them: the log-softmax of the logits row the method
// returned, before the logit bias, the penalties, temperature and any
// truncation (llama.cpp's server computes its n_probs from the same row
// unless post-sampling probabilities are asked for). They say what the model
// thinks of a token, whatever the sampling settings.
import { largest } from './sampler.js';
import type { LlmTokenizer } from './tokenizer.js';
import type { TokenLogprob, TopLogprob } from './types.js';

/** A token id with its log-probability. */
export interface RankedToken {
  readonly id: number;
  readonly logprob: number;
}

/**
 * log softmax(row) at `token`, and the `top` most likely tokens of the row,
 * most likely first (ties: the lower id). A +Infinity logit takes the whole
 * probability (shared with any other +Infinity), a -Infinity logit has
 * -Infinity; a row with a NaN, or with nothing but -Infinity, has no
 * distribution and gives NaN.
 */
export function rowLogprobs(row: Float32Array, token: number, top: number): { logprob: number; top: RankedToken[] } {
  let max = -Infinity;
  let nan = false;
  for (let i = 0; i < row.length; i++) {
    const value = row[i]!;
    if (value > max) max = value;
    else if (Number.isNaN(value)) nan = true;
  }
  let logprobOf: (logit: number) => number;
  if (nan || max === -Infinity) logprobOf = () => Number.NaN;
  else if (max === Infinity) {
    let infinite = 0;
    for (let i = 0; i < row.length; i++) if (row[i] === Infinity) infinite++;
    const share = -Math.log(infinite);
    logprobOf = (logit) => (logit === Infinity ? share : -Infinity);
  } else {
    let sum = 0;
    for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
    const logSum = Math.log(sum);
    logprobOf = (logit) => logit - max - logSum;
  }
  const ids = new Uint32Array(Math.min(top, row.length));
  const count = largest(row, ids.length, ids);
  const ranked = Array.from(ids.subarray(0, count)).sort((a, b) => row[b]! - row[a]! || a - b);
  return { logprob: logprobOf(row[token]!), top: ranked.map((id) => ({ id, logprob: logprobOf(row[id]!) })) };
}

const utf8 = new TextDecoder('utf-8');

/** A token's bytes; none for an id the tokenizer does not have (a model's vocabulary may be padded past it). */
export function tokenBytes(tokenizer: LlmTokenizer, id: number): Uint8Array {
  return id < tokenizer.vocabSize ? tokenizer.tokenBytes(id) : new Uint8Array(0);
}

function describe(tokenizer: LlmTokenizer, { id, logprob }: RankedToken): TopLogprob {
  const bytes = tokenBytes(tokenizer, id);
  return { id, text: utf8.decode(bytes), bytes: Array.from(bytes), logprob };
}

/** A generated token's log-probabilities, with texts, as the result gives them. */
export function tokenLogprob(tokenizer: LlmTokenizer, row: Float32Array, token: number, top: number): TokenLogprob {
  const { logprob, top: ranked } = rowLogprobs(row, token, top);
  return { ...describe(tokenizer, { id: token, logprob }), topLogprobs: ranked.map((entry) => describe(tokenizer, entry)) };
}
