// etna/llm: text in, text out for ExecuTorch LLM programs.
export { Llm, type ChatOptions, type LlmLoadOptions } from './llm.js';
export { LlmSession, type SaveSessionOptions } from './session.js';
export { ChatSession, type ChatSessionOptions } from './chat.js';
export {
  applyChatTemplate,
  CHAT_TEMPLATE_OPTIONS,
  type ChatContentPart,
  type ChatMessage,
  type ChatTemplateOptions,
  type RenderedChat,
} from './chat-template.js';
export type { ChatTemplateSpec, ConfigSource, GenerationConfig, TokenSpec, TokenizerConfig } from './config.js';
export { Generation } from './generation.js';
export {
  describeNumberRule,
  GENERATE_NUMBER_RULES,
  LOGIT_BIAS_RULE,
  logitBiasFault,
  numberFault,
  stopFault,
  type FieldFault,
  stopTokensFault,
  type GenerateOptions,
  type NumberRule,
  type NumericGenerateOption,
  type OptionFault,
  type StopFault,
  type StopLimits,
} from './options.js';
export type { GenerationResult, GenerationStats, StopReason, TokenLogprob, TopLogprob } from './types.js';
export { METADATA_METHODS, type LlmMetadata, type StepMethod } from './metadata.js';
export { argmax, DEFAULT_PENALTY_LAST_N, Sampler, type Candidates, type SamplingOptions } from './sampler.js';
export { TextStream } from './detokenizer.js';
export { loadTokenizer, type LlmTokenizer, type LoadTokenizerOptions, type TokenizerSource } from './tokenizer.js';
