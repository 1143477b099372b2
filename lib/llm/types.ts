// What a generation gives back: its result and its timings.

/** ExecuTorch's Stats, in milliseconds. */
export interface GenerationStats {
  promptTokens: number;
  /**
   * Positions already in the session's cache that the turn kept instead of
   * prefilling: earlier turns of a session, or the prefix `complete()`
   * matched (0 for `llm.generate()`).
   */
  cachedTokens: number;
  generatedTokens: number;
  /** Loading the program and reading its metadata (`Llm.load`). */
  loadMs: number;
  /** Waiting for this generation's module over the program: its load, or less when one was loaded ahead (0 for a later turn of a session). */
  sessionLoadMs: number;
  /** Encoding the prompt into tokens. */
  encodeMs: number;
  /** Running the prompt through the model, up to the logits of its last token. */
  prefillMs: number;
  /** From the start of the generation to the first generated token. */
  timeToFirstTokenMs: number;
  /** From the end of the prefill to the last generated token. */
  decodeMs: number;
  /** Time spent sampling, over all generated tokens. */
  samplingMs: number;
  /** From the start of the generation to its end. */
  totalMs: number;
  /** promptTokens over prefillMs. */
  promptTokensPerSecond: number;
  /** generatedTokens over decodeMs, as ExecuTorch reports its generation rate. */
  tokensPerSecond: number;
}

export type StopReason = 'eos' | 'length' | 'stop' | 'aborted' | 'context';

/**
 * A token and its log-probability under the model: the log-softmax of the
 * logits row the method returned, before the logit bias, the penalties,
 * temperature and any truncation (OpenAI's logprobs, llama.cpp's n_probs).
 */
export interface TopLogprob {
  id: number;
  /** The token's bytes decoded as UTF-8 (a part of a character shows as U+FFFD). */
  text: string;
  bytes: number[];
  logprob: number;
}

/** A generated token's log-probability, with the most likely tokens at its position. */
export interface TokenLogprob extends TopLogprob {
  /** `topLogprobs` of them, most likely first (ties: the lower id). */
  topLogprobs: TopLogprob[];
}

export interface GenerationResult {
  /** The prompt's token ids as fed (BOS and EOS included). */
  promptTokens: number[];
  /** Generated token ids, the end-of-sequence token included when that was the reason to stop. */
  tokens: number[];
  /** Every streamed piece joined. */
  text: string;
  stopReason: StopReason;
  stats: GenerationStats;
  /** With the `logprobs` option: one entry per generated token, in order. */
  logprobs?: TokenLogprob[];
}
