// A fixed set of LLM sessions over one model, lent to one request at a time,
// with a bounded wait line. A session holds a KV cache, so it is reset when
// it comes back: the next request starts from an empty context, and gives
// what it would on a fresh session.

/** Thrown by `acquire` when every session is busy and the wait line is full. */
export class PoolBusyError extends Error {
  constructor(size, queueLimit) {
    super(`all ${size} sessions are generating and ${queueLimit} requests are already waiting; retry later`);
    this.name = 'PoolBusyError';
    this.code = 'BUSY';
  }
}

/** Thrown by `acquire` once `close` has been called, and to requests still waiting then. */
export class PoolClosedError extends Error {
  constructor() {
    super('the server is shutting down');
    this.name = 'PoolClosedError';
    this.code = 'SHUTTING_DOWN';
  }
}

export class SessionPool {
  #idle;
  /** Requests waiting for a session: { resolve, reject, signal, onAbort }, first come first served. */
  #waiting = [];
  #busy = 0;
  #closed = false;
  #drained = [];

  /**
   * @param {readonly { reset(): void }[]} sessions
   * @param {number} queueLimit requests allowed to wait for a session; more are refused with PoolBusyError
   */
  constructor(sessions, queueLimit) {
    if (sessions.length === 0) throw new RangeError('a pool needs at least one session');
    this.sessions = sessions;
    this.queueLimit = queueLimit;
    this.#idle = [...sessions];
  }

  get stats() {
    return { size: this.sessions.length, busy: this.#busy, waiting: this.#waiting.length, queueLimit: this.queueLimit };
  }

  /**
   * A free session, now or when one comes back if the line has room. An
   * aborted `signal` takes the request out of the line (rejecting with the
   * signal's reason), so a client that left holds no place.
   */
  acquire(signal) {
    if (this.#closed) return Promise.reject(new PoolClosedError());
    if (signal?.aborted) return Promise.reject(signal.reason);
    const session = this.#idle.shift();
    if (session !== undefined) {
      this.#busy++;
      return Promise.resolve(session);
    }
    if (this.#waiting.length >= this.queueLimit) return Promise.reject(new PoolBusyError(this.sessions.length, this.queueLimit));
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

  /** Gives a session back once its generation has ended: reset, then to the first in line or the idle set. */
  release(session) {
    session.reset();
    const next = this.#waiting.shift();
    if (next !== undefined) {
      // The waiting request takes the session over directly, so the busy count stays.
      next.signal?.removeEventListener('abort', next.onAbort);
      next.resolve(session);
      return;
    }
    this.#busy--;
    this.#idle.push(session);
    if (this.#busy === 0) for (const resolve of this.#drained.splice(0)) resolve();
  }

  /** Refuses new requests and turns away those waiting; resolves when every lent session is back. */
  close() {
    this.#closed = true;
    for (const waiter of this.#waiting.splice(0)) {
      waiter.signal?.removeEventListener('abort', waiter.onAbort);
      waiter.reject(new PoolClosedError());
    }
    if (this.#busy === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drained.push(resolve));
  }
}
