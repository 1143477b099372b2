// Session snapshots in Redis, through ioredis (an optional dependency: only
// a server given a redis:// store loads it). Commands fail at once while
// the connection is down (no offline queue), and the clients reconnect in
// the background; how long a request waits for a slow Redis is the
// server's to bound (GuardedStore).
//
// A snapshot is kept as chunks over several connections, with a small
// manifest under its key written last. Redis sends at most 64 KiB to one
// client per turn of its event loop, so one large value comes back in
// hundreds of turns; chunks fetched over a few connections at once come
// back several times faster (`etna bench chat` measures the hand-off). A
// reader sees a whole snapshot or none: the manifest names the chunks of
// one write, and a replaced write's chunks are kept a while for readers
// that have just read its manifest.
import { randomBytes } from 'node:crypto';

import { EtnaError } from '../errors.js';
import { largeBytes } from '../module.js';
import { DEFAULT_STATE_TTL_SECONDS, DirectoryStateStore, type StateStore, type StateStoreOptions } from './state-store.js';

/** What this store uses of an ioredis client. */
interface RedisClient {
  get(key: string): Promise<string | null>;
  getBuffer(key: string): Promise<Buffer | null>;
  set(key: string, value: Buffer | string, mode: 'EX', seconds: number): Promise<unknown>;
  expire(key: string, seconds: number): Promise<unknown>;
  connect(): Promise<void>;
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

export interface RedisStateStoreOptions extends StateStoreOptions {
  /** Connections chunks travel over at once (default 4). */
  connections?: number;
  /** Bytes per chunk (default 2 MiB). */
  chunkBytes?: number;
}

/** Longest wait between two attempts to reconnect. */
const MAX_RECONNECT_DELAY_MS = 2000;
/**
 * A command unanswered this long fails, and its bytes are freed. The server
 * waits far less for a store (GuardedStore); this only bounds what a
 * connection that has silently died holds.
 */
const COMMAND_TIMEOUT_MS = 30_000;
export const DEFAULT_REDIS_CONNECTIONS = 4;
export const DEFAULT_CHUNK_BYTES = 2 * 2 ** 20;
/** Seconds a replaced snapshot's chunks stay for readers that read its manifest just before. */
const REPLACED_CHUNKS_SECONDS = 30;
const MANIFEST_FORMAT = 'etna-chunks/1';

/** What the key itself holds: where the chunks of the snapshot written last are. */
interface Manifest {
  readonly format: typeof MANIFEST_FORMAT;
  /** Names this write's chunks apart from any other write's under the same key. */
  readonly id: string;
  readonly bytes: number;
  readonly chunkBytes: number;
}

const chunkKey = (key: string, id: string, index: number): string => `${key}:chunk:${id}:${index}`;
const chunkCount = (manifest: Manifest): number => Math.ceil(manifest.bytes / manifest.chunkBytes);

function parseManifest(key: string, text: string): Manifest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const { format, id, bytes, chunkBytes } = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  const whole = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
  if (format !== MANIFEST_FORMAT || typeof id !== 'string' || !whole(bytes) || !whole(chunkBytes) || chunkBytes === 0) {
    throw new EtnaError('INVALID_INPUT', `state store: the value under '${key}' is not a manifest of this etna's (${MANIFEST_FORMAT})`);
  }
  return { format, id, bytes, chunkBytes };
}

export class RedisStateStore implements StateStore {
  private constructor(
    readonly location: string,
    private readonly clients: readonly RedisClient[],
    private readonly ttlSeconds: number,
    private readonly chunkBytes: number,
  ) {}

  /**
   * A store on the Redis server at `url` (`redis://[:PASSWORD@]HOST:PORT[/DB]`,
   * or `rediss://` for TLS). A server that does not answer yet is no error:
   * the clients keep trying, and calls fail until they connect.
   */
  static async connect(url: string, options: RedisStateStoreOptions = {}): Promise<RedisStateStore> {
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
    const connections = options.connections ?? DEFAULT_REDIS_CONNECTIONS;
    const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
    if (!Number.isInteger(connections) || connections < 1 || connections > 64) {
      throw new EtnaError('INVALID_INPUT', `state store: connections must be an integer from 1 to 64, got ${connections}`);
    }
    if (!Number.isInteger(chunkBytes) || chunkBytes < 1024) {
      throw new EtnaError('INVALID_INPUT', `state store: chunkBytes must be an integer of at least 1024, got ${chunkBytes}`);
    }
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
    const clients: RedisClient[] = Array.from({ length: connections }, () => {
      const client = new Redis(url, {
        lazyConnect: true,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        commandTimeout: COMMAND_TIMEOUT_MS,
        retryStrategy: (attempt: number) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
      });
      // Connection errors also fail the commands made meanwhile, which is where the server hears of them.
      client.on('error', () => undefined);
      return client;
    });
    await Promise.all(clients.map((client) => client.connect().catch(() => undefined)));
    const location = `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`;
    return new RedisStateStore(location, clients, options.ttlSeconds ?? DEFAULT_STATE_TTL_SECONDS, chunkBytes);
  }

  // Chunk i travels over connection i mod n; the manifest over the first.
  private client(index: number): RedisClient {
    return this.clients[index % this.clients.length]!;
  }

  /** The snapshot under `key`; undefined when there is none, or when a chunk of it has expired. */
  async get(key: string): Promise<Uint8Array | undefined> {
    const text = await this.client(0).get(key);
    if (text === null) return undefined;
    const manifest = parseManifest(key, text);
    const out = largeBytes(manifest.bytes);
    const chunks = await Promise.all(
      Array.from({ length: chunkCount(manifest) }, (_, i) => this.client(i).getBuffer(chunkKey(key, manifest.id, i))),
    );
    for (const [i, chunk] of chunks.entries()) {
      const expected = Math.min(manifest.chunkBytes, manifest.bytes - i * manifest.chunkBytes);
      if (chunk === null) return undefined;
      if (chunk.byteLength !== expected) {
        throw new EtnaError(
          'INVALID_INPUT',
          `state store: chunk ${i} of '${key}' holds ${chunk.byteLength} bytes, its manifest says ${expected}`,
        );
      }
      out.set(chunk, i * manifest.chunkBytes);
    }
    return out;
  }

  async set(key: string, value: Uint8Array): Promise<void> {
    const manifest: Manifest = {
      format: MANIFEST_FORMAT,
      id: randomBytes(8).toString('hex'),
      bytes: value.byteLength,
      chunkBytes: this.chunkBytes,
    };
    const [replaced] = await Promise.all([
      this.client(0).get(key),
      ...Array.from({ length: chunkCount(manifest) }, (_, i) => {
        const chunk = value.subarray(i * manifest.chunkBytes, (i + 1) * manifest.chunkBytes);
        const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
        return this.client(i).set(chunkKey(key, manifest.id, i), bytes, 'EX', this.ttlSeconds);
      }),
    ]);
    // Last, so that a reader never finds a manifest whose chunks are not all there.
    await this.client(0).set(key, JSON.stringify(manifest), 'EX', this.ttlSeconds);
    if (typeof replaced !== 'string') return;
    let old: Manifest;
    try {
      old = parseManifest(key, replaced);
    } catch {
      return; // Not ours: nothing of it to expire.
    }
    const ttl = Math.min(REPLACED_CHUNKS_SECONDS, this.ttlSeconds);
    await Promise.all(Array.from({ length: chunkCount(old) }, (_, i) => this.client(i).expire(chunkKey(key, old.id, i), ttl)));
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((client) => client.quit().catch(() => client.disconnect())));
  }
}

/** A store by its description: `redis://...` or `rediss://...` for Redis, anything else a folder. */
export function openStateStore(spec: string, options: StateStoreOptions = {}): Promise<StateStore> {
  if (/^rediss?:\/\//i.test(spec)) return RedisStateStore.connect(spec, options);
  return DirectoryStateStore.open(spec, options);
}
