// The pool the server lends its sessions from: the free item a request
// scores highest, a wait line a request can leave, and a close that turns
// away those waiting.
import { describe, expect, it } from 'vitest';

import { Pool, PoolBusyError, PoolClosedError } from '../../lib/serve/pool.js';

const item = (name: string, score = 0) => ({ name, score, resets: 0 });
type Item = ReturnType<typeof item>;

describe('Pool', () => {
  it('lends the free item a request scores highest (the one idle longest on a tie)', async () => {
    const [a, b, c] = [item('a', 1), item('b', 3), item('c', 3)];
    const pool = new Pool<Item>([a, b, c], 0, { noun: 'session' });
    expect(await pool.acquire(undefined, (candidate) => candidate.score)).toBe(b);
    expect(await pool.acquire(undefined, (candidate) => candidate.score)).toBe(c);
    expect(await pool.acquire()).toBe(a);
    await expect(pool.acquire()).rejects.toThrow(new PoolBusyError(3, 'session', 0));
    pool.release(b);
    expect(pool.idleItems).toEqual([b]);
    for (const lent of [a, c]) pool.release(lent);
    expect(await pool.acquire(undefined, (candidate) => -candidate.score)).toBe(a);
    pool.release(a);
    expect(pool.stats).toEqual({ size: 3, busy: 0, waiting: 0, queueLimit: 0 });
  });

  it('hands a returned item (after onReturn) to the first in line; a request whose signal aborts leaves the line', async () => {
    const a = item('a');
    const pool = new Pool<Item>([a], 2, { noun: 'session', onReturn: (lent) => lent.resets++ });
    await pool.acquire();
    const leaving = new AbortController();
    const left = pool.acquire(leaving.signal);
    const staying = pool.acquire();
    leaving.abort(new Error('gone'));
    await expect(left).rejects.toThrow('gone');
    expect(pool.stats.waiting).toBe(1);
    pool.release(a);
    await expect(staying).resolves.toBe(a);
    expect(a.resets).toBe(1);
    expect(pool.stats).toEqual({ size: 1, busy: 1, waiting: 0, queueLimit: 2 });
  });

  it('close turns away those waiting when asked, and resolves when every item is back', async () => {
    const a = item('a');
    const pool = new Pool<Item>([a], 2);
    await pool.acquire();
    const waiting = pool.acquire();
    let closed = false;
    const closing = pool.close({ turnAwayWaiting: true }).then(() => (closed = true));
    await expect(waiting).rejects.toBeInstanceOf(PoolClosedError);
    await expect(pool.acquire()).rejects.toBeInstanceOf(PoolClosedError);
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    pool.release(a);
    await closing;
    expect(closed).toBe(true);
    expect(() => new Pool([], 1, { noun: 'session' })).toThrow('a pool needs at least one session');
  });
});
