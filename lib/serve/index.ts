// etna-runtime/serve: an OpenAI-compatible HTTP server over an Llm, with a
// prefix cache and conversations handed between replicas through a state
// store; and the pool of items with a bounded wait line that it runs on.
export { CONVERSATION_HEADER, createServer, LlmServer, type GenerationCounts, type ServerOptions, type ServerStats } from './server.js';
export { Pool, PoolBusyError, PoolClosedError, type PoolOptions, type PoolStats } from './pool.js';
export { DirectoryStateStore, type StateStore, type StateStoreOptions } from './state-store.js';
export { openStateStore, RedisStateStore } from './redis-store.js';
