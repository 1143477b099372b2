// A fixed set of modules handed out one call at a time, with a bounded wait
// list. Each module runs one call at a time anyway (its calls queue behind
// each other); the pool spreads calls over several modules so they run in
// parallel on the libuv thread pool, and says "busy" instead of queueing
// without bound when every module is taken.

/** Thrown by `run` when every module is busy and the wait list is full. */
export class PoolBusyError extends Error {
  constructor(size, queueLimit) {
    super(`all ${size} modules are busy and ${queueLimit} calls are already waiting; retry later`);
    this.name = 'PoolBusyError';
    this.code = 'BUSY';
  }
}

/** Thrown by `run` once `close` has been called. */
export class PoolClosedError extends Error {
  constructor() {
    super('the server is shutting down');
    this.name = 'PoolClosedError';
    this.code = 'SHUTTING_DOWN';
  }
}

export class ModulePool {
  #idle;
  #waiting = [];
  #busy = 0;
  #closed = false;
  #drained = [];

  /**
   * @param {readonly { execute(method: string, inputs: unknown[]): Promise<unknown[]> }[]} modules
   * @param {number} queueLimit calls allowed to wait for a module; more are refused with PoolBusyError
   */
  constructor(modules, queueLimit) {
    if (modules.length === 0) throw new RangeError('a pool needs at least one module');
    this.modules = modules;
    this.queueLimit = queueLimit;
    this.#idle = [...modules];
  }

  get stats() {
    return { size: this.modules.length, busy: this.#busy, waiting: this.#waiting.length, queueLimit: this.queueLimit };
  }

  /** Runs one call on the first free module, waiting in line if the line is not full. */
  async run(method, inputs) {
    const module = await this.#acquire();
    try {
      return await module.execute(method, inputs);
    } finally {
      this.#release(module);
    }
  }

  /** Refuses new calls; resolves when the calls already running or waiting have finished. */
  close() {
    this.#closed = true;
    if (this.#busy === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drained.push(resolve));
  }

  #acquire() {
    if (this.#closed) return Promise.reject(new PoolClosedError());
    const module = this.#idle.shift();
    if (module !== undefined) {
      this.#busy++;
      return Promise.resolve(module);
    }
    if (this.#waiting.length >= this.queueLimit) return Promise.reject(new PoolBusyError(this.modules.length, this.queueLimit));
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #release(module) {
    const next = this.#waiting.shift();
    // A waiting call takes the module over directly, so the busy count stays.
    if (next !== undefined) {
      next(module);
      return;
    }
    this.#busy--;
    this.#idle.push(module);
    if (this.#busy === 0) for (const resolve of this.#drained.splice(0)) resolve();
  }
}
