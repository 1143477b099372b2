// The state stores on their own: a folder (atomic writes, states that
// expire), and the guard the server puts around any store (calls bounded by
// a timeout, failures answered as "no state", one warning per outage).
import { Redis } from 'ioredis';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { openStateStore, RedisStateStore } from '../../lib/serve/redis-store.js';
import { DirectoryStateStore, GuardedStore, type StateStore } from '../../lib/serve/state-store.js';
import { rejection } from '../helpers/errors.js';
import { redisServer, workDir } from './helpers.js';

describe('DirectoryStateStore', () => {
  it('keeps bytes by key in one file each, written whole, until they expire', async () => {
    const folder = path.join(workDir, 'unit-store');
    const store = await DirectoryStateStore.open(folder, { ttlSeconds: 60 });
    expect(await store.get('etna:llama:a')).toBeUndefined();
    await store.set('etna:llama:a', Uint8Array.of(1, 2, 3));
    await store.set('etna:llama:b/../weird key', Uint8Array.of(4));
    await store.set('etna:llama:a', Uint8Array.of(5, 6));
    expect(await store.get('etna:llama:a')).toEqual(Uint8Array.of(5, 6));
    expect(await store.get('etna:llama:b/../weird key')).toEqual(Uint8Array.of(4));
    // No temporary files are left behind, and every name is a hash.
    const files = fs.readdirSync(folder);
    expect(files).toHaveLength(2);
    for (const file of files) expect(file).toMatch(/^[0-9a-f]{64}\.etls$/);
    // A state last written longer ago than the time to live is gone.
    const old = new Date(Date.now() - 61_000);
    for (const file of files) fs.utimesSync(path.join(folder, file), old, old);
    expect(await store.get('etna:llama:a')).toBeUndefined();
    expect(fs.readdirSync(folder)).toHaveLength(1);
    expect((await openStateStore(folder)).location).toBe(folder);
  });

  it("refuses a folder it cannot use, and a URL that is not Redis's", async () => {
    const file = path.join(workDir, 'a-file');
    fs.writeFileSync(file, 'x');
    const notFolder = await rejection(DirectoryStateStore.open(path.join(file, 'states')));
    expect(notFolder.code).toBe('INVALID_INPUT');
    expect(notFolder.message).toMatch(/^state store: cannot use the folder '.*a-file\/states': /);
    expect((await rejection(RedisStateStore.connect('http://localhost:6379'))).message).toBe(
      "state store: 'http://localhost:6379' is not a redis:// or rediss:// URL",
    );
  });
});

describe('RedisStateStore', () => {
  it('keeps a snapshot as chunks over several connections under a manifest, read back whole', async () => {
    const redis = await redisServer();
    const store = await RedisStateStore.connect(redis.url, { connections: 3, chunkBytes: 2 ** 20, ttlSeconds: 600 });
    const raw = new Redis(redis.url);
    try {
      const value = new Uint8Array(5 * 2 ** 20 + 123).map((_, i) => (i * 31 + 7) % 251);
      expect(await store.get('etna:llama:a')).toBeUndefined();
      await store.set('etna:llama:a', value);
      const back = await store.get('etna:llama:a');
      expect(back!.byteLength).toBe(value.byteLength);
      expect(Buffer.compare(back!, value)).toBe(0);
      const manifest = JSON.parse((await raw.get('etna:llama:a'))!);
      expect(manifest).toMatchObject({ format: 'etna-chunks/1', bytes: value.byteLength, chunkBytes: 2 ** 20 });
      const chunks = (await raw.keys('etna:llama:a:chunk:*')).sort();
      expect(chunks).toHaveLength(6);
      for (const key of chunks) expect(await raw.ttl(key)).toBeGreaterThan(590);

      // Replaced: the new bytes are read; the old chunks stay a short while for readers of the old manifest.
      await store.set('etna:llama:a', Uint8Array.of(9, 8, 7));
      expect(await store.get('etna:llama:a')).toEqual(Uint8Array.of(9, 8, 7));
      for (const key of chunks) expect(await raw.ttl(key)).toBeLessThanOrEqual(30);
      await store.set('etna:llama:empty', new Uint8Array(0));
      expect(await store.get('etna:llama:empty')).toEqual(new Uint8Array(0));

      // A chunk gone (expired) is no state; a chunk of the wrong size, or a value that is no manifest, is a failure.
      await store.set('etna:llama:b', value);
      const id = JSON.parse((await raw.get('etna:llama:b'))!).id;
      await raw.del(`etna:llama:b:chunk:${id}:5`);
      expect(await store.get('etna:llama:b')).toBeUndefined();
      await raw.set(`etna:llama:b:chunk:${id}:5`, 'short');
      expect((await rejection(store.get('etna:llama:b'))).message).toBe(
        "state store: chunk 5 of 'etna:llama:b' holds 5 bytes, its manifest says 123",
      );
      await raw.set('etna:llama:c', 'not a manifest');
      expect((await rejection(store.get('etna:llama:c'))).message).toMatch(
        /^state store: the value under 'etna:llama:c' is not a manifest/,
      );
      await store.set('etna:llama:c', Uint8Array.of(1));
      expect(await store.get('etna:llama:c')).toEqual(Uint8Array.of(1));
    } finally {
      raw.disconnect();
      await store.close();
    }
    expect((await rejection(RedisStateStore.connect(redis.url, { connections: 0 }))).code).toBe('INVALID_INPUT');
    expect((await rejection(RedisStateStore.connect(redis.url, { chunkBytes: 10 }))).message).toMatch(/chunkBytes must be/);
  });
});

/** A store whose calls answer, fail or never answer, as the test sets it. */
function scriptedStore(): StateStore & { mode: 'ok' | 'fail' | 'hang'; values: Map<string, Uint8Array> } {
  const values = new Map<string, Uint8Array>();
  const store = {
    location: 'scripted',
    mode: 'ok' as 'ok' | 'fail' | 'hang',
    values,
    answer<T>(value: () => T): Promise<T> {
      if (store.mode === 'fail') return Promise.reject(new Error('connection refused'));
      if (store.mode === 'hang') return new Promise<T>(() => undefined);
      return Promise.resolve(value());
    },
    get: (key: string) => store.answer(() => values.get(key)),
    set: (key: string, value: Uint8Array) => store.answer(() => void values.set(key, value)),
    close: async () => undefined,
  };
  return store;
}

describe('GuardedStore', () => {
  it('answers "no state" when the store fails or is slow, warns once per outage, and again when it answers', async () => {
    const store = scriptedStore();
    const warnings: string[] = [];
    const guarded = new GuardedStore(store, 50, (message) => warnings.push(message));
    expect(await guarded.set('k', Uint8Array.of(7))).toBe(true);
    expect(await guarded.get('k')).toEqual(Uint8Array.of(7));
    store.mode = 'hang';
    const started = performance.now();
    expect(await guarded.get('k')).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(1000);
    store.mode = 'fail';
    expect(await guarded.set('k', Uint8Array.of(8))).toBe(false);
    expect(await guarded.get('k')).toBeUndefined();
    expect(guarded.available).toBe(false);
    expect(warnings).toEqual([
      'state store scripted: a read failed (no answer within 50 ms); conversations are prefilled in full until it answers',
    ]);
    store.mode = 'ok';
    expect(await guarded.get('k')).toEqual(Uint8Array.of(7));
    expect(warnings.slice(1)).toEqual(['state store scripted answers again']);
    store.mode = 'fail';
    await guarded.get('k');
    expect(warnings.slice(2)).toEqual([
      'state store scripted: a read failed (connection refused); conversations are prefilled in full until it answers',
    ]);
    expect(guarded.failures).toBe(4);
  });
});
