// Session snapshots in Redis, through ioredis (an optional dependency: only
// a server given a redis:// store loads it). Commands fail at once while
// the connection is down (no offline queue), and the client reconnects in
// the background; how long a request waits for a slow Redis is the
// server's to bound (GuardedStore).
import { EtnaError } from '../errors.js';
import { DEFAULT_STATE_TTL_SECONDS, DirectoryStateStore, type StateStore, type StateStoreOptions } from './state-store.js';

/** What this store uses of an ioredis client. */
interface RedisClient {
  getBuffer(key: string): Promise<Buffer | null>;
  set(key: string, value: Buffer, mode: 'EX', seconds: number): Promise<unknown>;
  connect(): Promise<void>;
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** Longest wait between two attempts to reconnect. */
const MAX_RECONNECT_DELAY_MS = 2000;
/**
 * A command unanswered this long fails, and its bytes are freed. The server
 * waits far less for a store (GuardedStore); this only bounds what a
 * connection that has silently died holds.
 */
const COMMAND_TIMEOUT_MS = 30_000;

export class RedisStateStore implements StateStore {
  private constructor(
    readonly location: string,
    private readonly client: RedisClient,
    private readonly ttlSeconds: number,
  ) {}

  /**
   * A store on the Redis server at `url` (`redis://[:PASSWORD@]HOST:PORT[/DB]`,
   * or `rediss://` for TLS). A server that does not answer yet is no error:
   * the client keeps trying, and calls fail until it connects.
   */
  static async connect(url: string, options: StateStoreOptions = {}): Promise<RedisStateStore> {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new EtnaError('INVALID_INPUT', `state store: '${url}' is not a URL (redis://HOST:PORT)`);
    }
    if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
      throw new EtnaError('INVALID_INPUT', `state store: '${url}' is not a redis:// or rediss:// URL`);
    }
    if (parsed.hostname === '') throw new EtnaError('INVALID_INPUT', `state store: '${url}' names no host (redis://HOST:PORT)`);
    let Redis: typeof import('ioredis').Redis;
    try {
      ({ Redis } = await import('ioredis'));
    } catch (error) {
      throw new EtnaError(
        'INVALID_INPUT',
        `state store ${url}: the npm package ioredis, an optional dependency of etna-runtime, is not installed ` +
          `(npm install ioredis): ${(error as Error).message}`,
      );
    }
    const client: RedisClient = new Redis(url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      retryStrategy: (attempt: number) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
    });
    // Connection errors also fail the commands made meanwhile, which is where the server hears of them.
    client.on('error', () => undefined);
    await client.connect().catch(() => undefined);
    const location = `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
    return new RedisStateStore(location, client, options.ttlSeconds ?? DEFAULT_STATE_TTL_SECONDS);
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const value = await this.client.getBuffer(key);
    return value === null ? undefined : new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  }

  async set(key: string, value: Uint8Array): Promise<void> {
    await this.client.set(key, Buffer.from(value.buffer, value.byteOffset, value.byteLength), 'EX', this.ttlSeconds);
  }

  async close(): Promise<void> {
    await this.client.quit().catch(() => this.client.disconnect());
  }
}

/** A store by its description: `redis://...` or `rediss://...` for Redis, anything else a folder. */
export function openStateStore(spec: string, options: StateStoreOptions = {}): Promise<StateStore> {
  if (/^rediss?:\/\//i.test(spec)) return RedisStateStore.connect(spec, options);
  return DirectoryStateStore.open(spec, options);
}
