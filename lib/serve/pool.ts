// A fixed number of items (modules, LLM sessions) lent to one request at a
// time, with a bounded wait line. A module or a session runs one call at a
// time anyway (its calls queue behind each other); the pool spreads requests
// over several, so they run at once on etna's call threads, and says "busy"
// instead of queueing without bound when every item is taken.

/** Thrown by `acquire` when every item is busy and the wait line is full. */
export class PoolBusyError extends Error {
  readonly code = 'BUSY';

  constructor(size: number, noun: string, queueLimit: number) {
    super(`all ${size} ${noun}s are busy and ${queueLimit} requests are already waiting; retry later`);
    this.name = 'PoolBusyError';
  }
}

/** Thrown by `acquire` once `close` has been called, and to requests still waiting then if `close` turns them away. */
export class PoolClosedError extends Error {
  readonly code = 'SHUTTING_DOWN';

  constructor() {
    super('the server is shutting down');
    this.name = 'PoolClosedError';
  }
}

export interface PoolOptions<T> {
  /** What messages call an item ('module', 'session'). */
  noun?: string;
  /** Done to an item when it comes back, before anyone else gets it (a session's reset). */
  onReturn?: (item: T) => void;
}

export interface PoolStats {
  size: number;
  busy: number;
  waiting: number;
  queueLimit: number;
}

interface Waiter<T> {
  resolve: (item: T) => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class Pool<T> {
  readonly size: number;
  private readonly idle: T[];
  /** Requests waiting for an item, first come first served. */
  private readonly waiting: Waiter<T>[] = [];
  private busy = 0;
  private closed = false;
  private readonly drained: (() => void)[] = [];
  private readonly noun: string;
  private readonly onReturn: ((item: T) => void) | undefined;

  /** `queueLimit`: requests allowed to wait for an item; more are refused with PoolBusyError. */
  constructor(
    items: readonly T[],
    readonly queueLimit: number,
    options: PoolOptions<T> = {},
  ) {
    this.noun = options.noun ?? 'item';
    if (items.length === 0) throw new RangeError(`a pool needs at least one ${this.noun}`);
    this.size = items.length;
    this.idle = [...items];
    this.onReturn = options.onReturn;
  }

  get stats(): PoolStats {
    return { size: this.size, busy: this.busy, waiting: this.waiting.length, queueLimit: this.queueLimit };
  }

  /** The items not lent out. */
  get idleItems(): readonly T[] {
    return this.idle;
  }

  /**
   * A free item, now or when one comes back if the line has room. Among free
   * items, the one `rank` scores highest (the first on a tie; without `rank`,
   * the one idle longest). An aborted `signal` takes the request out of the
   * line (rejecting with the signal's reason), so a client that left holds no
   * place.
   */
  acquire(signal?: AbortSignal, rank?: (item: T) => number): Promise<T> {
    if (this.closed) return Promise.reject(new PoolClosedError());
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.idle.length > 0) {
      let best = 0;
      if (rank !== undefined) {
        const scores = this.idle.map(rank);
        for (let i = 1; i < scores.length; i++) if (scores[i]! > scores[best]!) best = i;
      }
      this.busy++;
      return Promise.resolve(this.idle.splice(best, 1)[0]!);
    }
    if (this.waiting.length >= this.queueLimit) return Promise.reject(new PoolBusyError(this.size, this.noun, this.queueLimit));
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          this.waiting.splice(this.waiting.indexOf(waiter), 1);
          reject(signal?.reason);
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  /** Gives an item back once its request is done: to the first in line, or to the idle set. */
  release(item: T): void {
    this.onReturn?.(item);
    const next = this.waiting.shift();
    if (next !== undefined) {
      // The waiting request takes the item over directly, so the busy count stays.
      next.signal?.removeEventListener('abort', next.onAbort);
      next.resolve(item);
      return;
    }
    this.busy--;
    this.idle.push(item);
    if (this.busy === 0) for (const resolve of this.drained.splice(0)) resolve();
  }

  /** Runs `work` on a free item (waiting in line for one if the line has room), and gives the item back after. */
  async use<R>(work: (item: T) => Promise<R> | R, signal?: AbortSignal): Promise<R> {
    const item = await this.acquire(signal);
    try {
      return await work(item);
    } finally {
      this.release(item);
    }
  }

  /**
   * Refuses new requests; resolves when every lent item is back. Requests
   * already waiting are served, or with `turnAwayWaiting` rejected with
   * PoolClosedError (for long requests, such as generations, that would
   * hold the stop up).
   */
  close(options: { turnAwayWaiting?: boolean } = {}): Promise<void> {
    this.closed = true;
    if (options.turnAwayWaiting === true) {
      for (const waiter of this.waiting.splice(0)) {
        waiter.signal?.removeEventListener('abort', waiter.onAbort);
        waiter.reject(new PoolClosedError());
      }
    }
    if (this.busy === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }
}
