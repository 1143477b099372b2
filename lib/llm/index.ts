// etna/llm: text in, text out for ExecuTorch LLM programs.
export {
  Generation,
  Llm,
  LlmSession,
  type GenerateOptions,
  type GenerationResult,
  type GenerationStats,
  type LlmLoadOptions,
  type StopReason,
} from './llm.js';
export { METADATA_METHODS, type LlmMetadata, type StepMethod } from './metadata.js';
export { argmax, Sampler, type SamplingOptions } from './sampler.js';
export { TextStream } from './detokenizer.js';
export { loadTokenizer, type LlmTokenizer, type TokenizerSource } from './tokenizer.js';
