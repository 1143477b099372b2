// Where conversations' session snapshots wait between turns, so that any
// replica can continue one: a folder (local, or shared by the replicas) or
// Redis (redis-store.ts). The server reaches a store only through
// GuardedStore: every call bounded by a timeout, and a store that fails or
// is slow costs a full prefill and one warning, never the request.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

import { EtnaError } from '../errors.js';

/** Keeps bytes by key, each for a while (the store's time to live). */
export interface StateStore {
  /** Where it keeps them, for messages: a folder, or `redis://HOST:PORT`. */
  readonly location: string;
  /** The bytes under `key`, or undefined when there are none (or they have expired). */
  get(key: string): Promise<Uint8Array | undefined>;
  set(key: string, value: Uint8Array): Promise<void>;
  close(): Promise<void>;
}

export interface StateStoreOptions {
  /** Seconds a state is kept after it was last written (default 3600). */
  ttlSeconds?: number;
}

export const DEFAULT_STATE_TTL_SECONDS = 3600;
/** Milliseconds the server waits for a store's answer before it goes on without it. */
export const DEFAULT_STATE_TIMEOUT_MS = 1000;

/**
 * Files in a folder, one per key, named by the key's SHA-256 (any key makes
 * a safe name). A write goes to a temporary file renamed into place, so a
 * reader (another replica on a shared folder) sees a whole state or none.
 * A file older than the time to live counts as absent and is removed.
 */
export class DirectoryStateStore implements StateStore {
  private constructor(
    readonly location: string,
    private readonly ttlMs: number,
  ) {}

  static async open(folder: string, options: StateStoreOptions = {}): Promise<DirectoryStateStore> {
    try {
      await fs.mkdir(folder, { recursive: true });
      await fs.access(folder, fs.constants.W_OK | fs.constants.R_OK);
    } catch (error) {
      throw new EtnaError('INVALID_INPUT', `state store: cannot use the folder '${folder}': ${(error as Error).message}`);
    }
    return new DirectoryStateStore(path.resolve(folder), (options.ttlSeconds ?? DEFAULT_STATE_TTL_SECONDS) * 1000);
  }

  private file(key: string): string {
    return path.join(this.location, `${createHash('sha256').update(key).digest('hex')}.etls`);
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    const file = this.file(key);
    try {
      const handle = await fs.open(file, 'r');
      try {
        if (Date.now() - (await handle.stat()).mtimeMs > this.ttlMs) {
          await fs.rm(file, { force: true });
          return undefined;
        }
        return new Uint8Array(await handle.readFile());
      } finally {
        await handle.close();
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async set(key: string, value: Uint8Array): Promise<void> {
    const file = this.file(key);
    const temporary = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      await fs.writeFile(temporary, value);
      await fs.rename(temporary, file);
    } catch (error) {
      await fs.rm(temporary, { force: true });
      throw error;
    }
  }

  async close(): Promise<void> {}
}

/** A promise that rejects after `ms`; the call goes on, unheard (its failure too). */
function within<T>(ms: number, call: Promise<T>): Promise<T> {
  call.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([call, timeout]).finally(() => clearTimeout(timer));
}

/**
 * A store as the server uses it: calls bounded by `timeoutMs`, failures
 * answered with "no state" (the request then prefills in full) and told once
 * per outage through `warn`, and once more when the store answers again.
 */
export class GuardedStore {
  private failing = false;
  /** Calls that failed or timed out, since the start. */
  failures = 0;

  constructor(
    readonly store: StateStore,
    private readonly timeoutMs: number,
    private readonly warn: (message: string) => void,
  ) {}

  get available(): boolean {
    return !this.failing;
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    try {
      const value = await within(this.timeoutMs, this.store.get(key));
      this.answered();
      return value;
    } catch (error) {
      this.failed('read', error);
      return undefined;
    }
  }

  /** Whether the state was stored. */
  async set(key: string, value: Uint8Array): Promise<boolean> {
    try {
      await within(this.timeoutMs, this.store.set(key, value));
      this.answered();
      return true;
    } catch (error) {
      this.failed('write', error);
      return false;
    }
  }

  private answered(): void {
    if (!this.failing) return;
    this.failing = false;
    this.warn(`state store ${this.store.location} answers again`);
  }

  private failed(what: 'read' | 'write', error: unknown): void {
    this.failures++;
    if (this.failing) return;
    this.failing = true;
    const reason = error instanceof Error ? error.message : String(error);
    this.warn(`state store ${this.store.location}: a ${what} failed (${reason}); conversations are prefilled in full until it answers`);
  }
}
