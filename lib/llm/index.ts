// etna/llm: text in, text out for ExecuTorch LLM programs.
export { Llm, type LlmLoadOptions } from './llm.js';
export { LlmSession, type SaveSessionOptions } from './session.js';
export { Generation } from './generation.js';
export {
  describeNumberRule,
  GENERATE_NUMBER_RULES,
  numberFault,
  stopFault,
  type GenerateOptions,
  type NumberRule,
  type NumericGenerateOption,
  type OptionFault,
  type StopFault,
  type StopLimits,
} from './options.js';
export type { GenerationResult, GenerationStats, StopReason } from './types.js';
export { METADATA_METHODS, type LlmMetadata, type StepMethod } from './metadata.js';
export { argmax, Sampler, type SamplingOptions } from './sampler.js';
export { TextStream } from './detokenizer.js';
export { loadTokenizer, type LlmTokenizer, type TokenizerSource } from './tokenizer.js';
