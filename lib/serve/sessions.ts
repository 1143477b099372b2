// The sessions a server runs requests on, and where each request's cache
// comes from. A request takes the free session whose cache shares the most
// of its prompt; a cached prefix (prefix-cache.ts) or its conversation's
// stored state (state-store.ts) replaces that cache when it keeps more of
// the prompt. `session.complete()` then prefills only what
// the cache lacks. After the reply, the conversation's state is stored and a
// prefix the prompt shares with recent ones is cached.
import type { Llm } from '../llm/llm.js';
import { commonPrefix, type LlmSession } from '../llm/session.js';
import { decodeSessionSnapshot } from '../llm/snapshot.js';
import { Pool, type PoolStats } from './pool.js';
import type { PrefixCache } from './prefix-cache.js';
import type { GuardedStore } from './state-store.js';

/** A conversation's state as the store gave it: its snapshot and the token ids its cache holds. */
export interface ConversationState {
  readonly snapshot: Uint8Array;
  readonly tokens: readonly number[];
}

/** Where a request's cache came from. */
export type CacheSource = 'session' | 'prefix-cache' | 'conversation';

export interface SessionsOptions {
  readonly sessions: number;
  readonly maxQueue: number;
  readonly prefixCache: PrefixCache;
  readonly store: GuardedStore | undefined;
  /** Put before a conversation id to make its key in the store (the model's name, so that models never mix). */
  readonly keyPrefix: string;
  readonly warn: (message: string) => void;
}

export interface SessionsStats {
  pool: PoolStats;
  /** Requests whose cache came from each place (a session that shared nothing counts under 'session'). */
  sources: Record<CacheSource, number>;
  /** Conversation states stored, and those the store could not take. */
  stored: number;
  storeFailures: number;
}

export class Sessions {
  private readonly sources: Record<CacheSource, number> = { session: 0, 'prefix-cache': 0, conversation: 0 };
  private stored = 0;

  private constructor(
    private readonly llm: Llm,
    private readonly pool: Pool<LlmSession>,
    private readonly options: SessionsOptions,
  ) {}

  static async create(llm: Llm, options: SessionsOptions): Promise<Sessions> {
    const sessions = await Promise.all(Array.from({ length: options.sessions }, () => llm.session()));
    return new Sessions(llm, new Pool(sessions, options.maxQueue, { noun: 'session' }), options);
  }

  get stats(): SessionsStats {
    return { pool: this.pool.stats, sources: { ...this.sources }, stored: this.stored, storeFailures: this.options.store?.failures ?? 0 };
  }

  /** The stored state of a conversation, if the store has one it can read in time and it belongs to this model. */
  async conversation(id: string): Promise<ConversationState | undefined> {
    const snapshot = await this.options.store?.get(this.options.keyPrefix + id);
    if (snapshot === undefined) return undefined;
    try {
      return { snapshot, tokens: decodeSessionSnapshot(snapshot, this.llm.metadata).place.tokens };
    } catch (error) {
      this.options.warn(`conversation '${id}': its stored state is not this model's (${(error as Error).message}); prefilled in full`);
      return undefined;
    }
  }

  /**
   * A session for `prompt`: the free one whose cache shares the most of it,
   * its cache replaced by a cached prefix or the conversation's state when
   * one of those keeps more of the prompt (restored into the session). Waits in line when every
   * session is busy (PoolBusyError past the line's limit).
   */
  async acquire(prompt: readonly number[], conversation: ConversationState | undefined, signal: AbortSignal): Promise<LlmSession> {
    const session = await this.pool.acquire(signal, (candidate) => commonPrefix(candidate.tokens, prompt));
    // At most all of the prompt but its last token is kept: that token's logits give the first new one.
    const keeps = (tokens: readonly number[]): number => Math.min(commonPrefix(tokens, prompt), prompt.length - 1);
    const own = keeps(session.tokens);
    const candidates: { source: CacheSource; snapshot: Uint8Array; shared: number }[] = [];
    if (conversation !== undefined)
      candidates.push({ source: 'conversation', snapshot: conversation.snapshot, shared: keeps(conversation.tokens) });
    const hit = this.options.prefixCache.lookup(prompt);
    if (hit !== undefined) candidates.push({ source: 'prefix-cache', snapshot: hit.entry.snapshot, shared: hit.shared });
    const best = candidates.sort((a, b) => b.shared - a.shared)[0];
    if (best === undefined || best.shared <= own) {
      this.sources.session++;
      return session;
    }
    // Into the session itself: no module to load, and its state arena is already in memory. A refused snapshot leaves it as it was.
    try {
      await session.restore(best.snapshot);
      this.sources[best.source]++;
      if (best.source === 'prefix-cache') this.options.prefixCache.counted(best.shared);
    } catch (error) {
      this.options.warn(`a ${best.source} snapshot could not be restored (${(error as Error).message}); prefilled in full`);
      this.sources.session++;
    }
    return session;
  }

  /** Gives a session back (the one acquire returned). */
  release(session: LlmSession): void {
    this.pool.release(session);
  }

  /** Stores the conversation's state as the session holds it after its reply; false when the store did not take it. */
  async storeConversation(session: LlmSession, id: string): Promise<boolean> {
    const store = this.options.store;
    if (store === undefined) return false;
    const ok = await store.set(this.options.keyPrefix + id, await session.save());
    if (ok) this.stored++;
    return ok;
  }

  /** Caches the prefix `prompt` shares with recent prompts, if it is worth it and the session holds it. */
  async cachePrefix(session: LlmSession, prompt: readonly number[]): Promise<void> {
    const cache = this.options.prefixCache;
    const wanted = cache.wanted(prompt);
    if (wanted === 0 || commonPrefix(session.tokens, prompt) < wanted) return;
    cache.add(prompt.slice(0, wanted), await session.save({ position: wanted }));
  }

  /**
   * Refuses new requests and turns away those waiting; resolves once every
   * session is back and disposed.
   */
  async close(): Promise<void> {
    await this.pool.close({ turnAwayWaiting: true });
    await Promise.all(this.pool.idleItems.map((session) => session.dispose()));
  }
}
