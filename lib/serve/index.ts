// etna-runtime/serve: an OpenAI-compatible HTTP server over an Llm, with a
// prefix cache and conversations handed between replicas through a state
// store; and the pool of items with a bounded wait line that it runs on.
export { createServer, LlmServer, CONVERSATION_HEADER, type GenerationCounts, type ServerOptions } from './server.js';
export { ApiError, type ApiErrorBody, type ApiErrorType } from './errors.js';
export { CHAT_FIELDS, COMPLETION_FIELDS, type FieldValue, type GenerationField } from './fields.js';
export { Pool, PoolBusyError, PoolClosedError, type PoolOptions, type PoolStats } from './pool.js';
export { PrefixCache, type PrefixCacheOptions, type PrefixCacheStats } from './prefix-cache.js';
export { DirectoryStateStore, type StateStore, type StateStoreOptions } from './state-store.js';
export { openStateStore, RedisStateStore } from './redis-store.js';
export type { ChatMessage, ChatRole } from './request.js';
