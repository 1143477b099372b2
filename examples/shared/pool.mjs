// A fixed set of items (modules, LLM sessions) lent to one request at a time,
// with a bounded wait line, as both example servers use it. A module or a
// session runs one call at a time anyway (its calls queue behind each
// other); the pool spreads requests over several, so they run at once on
// etna's call threads, and says "busy" instead of queueing without bound
// when every item is taken.

/** Thrown by `acquire` when every item is busy and the wait line is full. */
export class PoolBusyError extends Error {
  constructor(size, noun, queueLimit) {
    super(`all ${size} ${noun}s are busy and ${queueLimit} requests are already waiting; retry later`);
    this.name = 'PoolBusyError';
    this.code = 'BUSY';
  }
}

/** Thrown by `acquire` once `close` has been called, and to requests still waiting then if `close` turns them away. */
export class PoolClosedError extends Error {
  constructor() {
    super('the server is shutting down');
    this.name = 'PoolClosedError';
    this.code = 'SHUTTING_DOWN';
  }
}

export class Pool {
  #idle;
  /** Requests waiting for an item: { resolve, reject, signal, onAbort }, first come first served. */
  #waiting = [];
  #busy = 0;
  #closed = false;
  #drained = [];
  #noun;
  #onReturn;

  /**
   * @param {readonly unknown[]} items
   * @param {number} queueLimit requests allowed to wait for an item; more are refused with PoolBusyError
   * @param {{ noun?: string, onReturn?: (item: unknown) => void }} [options] what messages call an item
   *   ('module'), and what is done to an item when it comes back, before anyone else gets it (a session's reset)
   */
  constructor(items, queueLimit, { noun = 'item', onReturn } = {}) {
    if (items.length === 0) throw new RangeError(`a pool needs at least one ${noun}`);
    this.items = items;
    this.queueLimit = queueLimit;
    this.#idle = [...items];
    this.#noun = noun;
    this.#onReturn = onReturn;
  }

  get stats() {
    return { size: this.items.length, busy: this.#busy, waiting: this.#waiting.length, queueLimit: this.queueLimit };
  }

  /**
   * A free item, now or when one comes back if the line has room. An aborted
   * `signal` takes the request out of the line (rejecting with the signal's
   * reason), so a client that left holds no place.
   */
  acquire(signal) {
    if (this.#closed) return Promise.reject(new PoolClosedError());
    if (signal?.aborted) return Promise.reject(signal.reason);
    const item = this.#idle.shift();
    if (item !== undefined) {
      this.#busy++;
      return Promise.resolve(item);
    }
    if (this.#waiting.length >= this.queueLimit) return Promise.reject(new PoolBusyError(this.items.length, this.#noun, this.queueLimit));
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject, signal, onAbort: undefined };
      waiter.onAbort = () => {
        this.#waiting.splice(this.#waiting.indexOf(waiter), 1);
        reject(signal.reason);
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /** Gives an item back once its request is done: to the first in line, or to the idle set. */
  release(item) {
    this.#onReturn?.(item);
    const next = this.#waiting.shift();
    if (next !== undefined) {
      // The waiting request takes the item over directly, so the busy count stays.
      next.signal?.removeEventListener('abort', next.onAbort);
      next.resolve(item);
      return;
    }
    this.#busy--;
    this.#idle.push(item);
    if (this.#busy === 0) for (const resolve of this.#drained.splice(0)) resolve();
  }

  /** Runs `work` on a free item (waiting in line for one if the line has room), and gives the item back after. */
  async use(work, signal) {
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
  close({ turnAwayWaiting = false } = {}) {
    this.#closed = true;
    if (turnAwayWaiting) {
      for (const waiter of this.#waiting.splice(0)) {
        waiter.signal?.removeEventListener('abort', waiter.onAbort);
        waiter.reject(new PoolClosedError());
      }
    }
    if (this.#busy === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drained.push(resolve));
  }
}
