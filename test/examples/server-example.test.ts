// examples/server: started as a user would (a child process on loopback, an
// ephemeral port), driven with concurrent requests and malformed ones, then
// stopped with SIGTERM. Its module pool is also checked on its own with
// modules whose calls the test finishes by hand, so "busy" is deterministic.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { Module, Tensor } from '../../lib/index.js';
// The pool the example imports from etna-runtime/serve.
import { Pool, PoolBusyError, PoolClosedError } from '../../lib/serve/pool.js';
import { runCli } from '../helpers/cli.js';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { repoRoot, testdataPath } from '../helpers/testdata.js';

const SERVER = path.join(repoRoot, 'examples/server/server.mjs');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-server-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function startServer(program: string, env: Record<string, string>): Promise<ServerProcess> {
  return startServerProcess([SERVER, program], { PORT: '0', ...env });
}

async function post(url: string, body: string): Promise<{ status: number; json: any }> {
  const response = await fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  return { status: response.status, json: await response.json() };
}

const f32 = (values: number[]) => ({ dtype: 'float32', shape: [values.length], data: values });

/** Everything a socket receives, when it closes, and any error (a reset) on it. */
function collect(socket: net.Socket) {
  let text = '';
  let failure: Error | undefined;
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (text += chunk));
  socket.on('error', (error) => (failure = error));
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  return { text: () => text, error: () => failure, closed };
}

/** The complete HTTP responses at the start of `text`. */
function parseResponses(text: string): { status: number; headers: string; body: string }[] {
  const responses: { status: number; headers: string; body: string }[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return responses;
    const headers = rest.slice(0, end);
    const length = Number(/^content-length: (\d+)$/im.exec(headers)?.[1] ?? 0);
    if (rest.length < end + 4 + length) return responses;
    responses.push({ status: Number(headers.split(' ')[1]), headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
}

describe('examples/server', () => {
  it('answers 200 concurrent requests correctly, refuses malformed ones with 400, keeps serving, stops cleanly on SIGTERM', async () => {
    const server = await startServer(testdataPath('et_add.pte'), { POOL_SIZE: '4', QUEUE_LIMIT: '256' });
    const run = `${server.url}/run/forward`;

    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => post(run, JSON.stringify({ inputs: [f32([i]), f32([i / 4])] }))),
    );
    answers.forEach(({ status, json }, i) => {
      expect(status).toBe(200);
      expect(json).toEqual({ outputs: [{ dtype: 'float32', shape: [1], data: [i + i / 4] }] });
    });

    const malformed: [string, string, string, RegExp][] = [
      [run, '{"inputs": [', 'INVALID_INPUT', /request body is not JSON/],
      [run, '{"values": []}', 'INVALID_INPUT', /must be \{"inputs": \[\.\.\.\]\}/],
      [run, JSON.stringify({ inputs: [f32([1])] }), 'INVALID_INPUT', /takes 2 inputs, got 1/],
      [
        run,
        JSON.stringify({ inputs: [{ dtype: 'int64', shape: [1], data: [1] }, f32([1])] }),
        'INVALID_INPUT',
        /input 0: expected float32\[1\], got int64\[1\] \(dtype differs\)/,
      ],
      [
        run,
        JSON.stringify({ inputs: [f32([1]), f32([1, 2])] }),
        'INVALID_INPUT',
        /input 1: expected float32\[1\], got float32\[2\] \(shape differs\)/,
      ],
      [
        run,
        JSON.stringify({ inputs: [{ dtype: 'float32', shape: [1], data: ['x'] }, f32([1])] }),
        'INVALID_INPUT',
        /inputs\[0\]\.data\[0\] = 'x' is not a number/,
      ],
      [`${server.url}/run/backward`, JSON.stringify({ inputs: [] }), 'METHOD_NOT_FOUND', /no method named 'backward'/],
      [`${server.url}/run/%E0%A4%A`, JSON.stringify({ inputs: [] }), 'INVALID_INPUT', /not a valid percent-encoded method name/],
    ];
    for (const [url, body, code, message] of malformed) {
      const { status, json } = await post(url, body);
      expect(status, body).toBe(400);
      expect(json.error.code, body).toBe(code);
      expect(json.error.message, body).toMatch(message);
    }

    const after = await post(run, JSON.stringify({ inputs: [f32([2.5]), f32([4])] }));
    expect(after).toEqual({ status: 200, json: { outputs: [{ dtype: 'float32', shape: [1], data: [6.5] }] } });
    const health = (await (await fetch(`${server.url}/health`)).json()) as {
      methods: string[];
      pool: { size: number; busy: number; waiting: number };
    };
    expect(health).toEqual({ methods: ['forward'], pool: { size: 4, busy: 0, waiting: 0, queueLimit: 256 } });

    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.stdout()).toMatch(/SIGTERM: finishing running calls, then stopping\nstopped\n$/);
    expect(server.stderr()).toBe('');
  }, 60_000);

  it('on SIGTERM answers every request sent on a keep-alive connection with 200 or 503, never a reset', async () => {
    const server = await startServer(testdataPath('et_add.pte'), { POOL_SIZE: '2', QUEUE_LIMIT: '64' });
    const { port } = new URL(server.url);
    const body = JSON.stringify({ inputs: [f32([1]), f32([2])] });
    const request = `POST /run/forward HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    // 20 keep-alive connections, each sending its next request as soon as the
    // previous one is answered (as a client with queued work does), until an
    // answer says the connection closes. SIGTERM comes once 40 requests are out.
    let written = 0;
    let signalled: () => void;
    const fortyWritten = new Promise<void>((resolve) => (signalled = resolve));
    const connections = Array.from({ length: 20 }, () => {
      const socket = net.connect(Number(port), '127.0.0.1');
      const received = collect(socket);
      const state = { sent: 0, received, closing: false };
      const send = (): void => {
        state.sent++;
        socket.write(request, () => {
          if (++written === 40) signalled();
        });
      };
      socket.on('connect', send);
      socket.on('data', () => {
        const answers = parseResponses(received.text());
        if (answers.length < state.sent) return;
        if (/^connection: close\r?$/im.test(answers[answers.length - 1]!.headers)) state.closing = true;
        else send();
      });
      return state;
    });
    await fortyWritten;
    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    await Promise.all(connections.map(({ received }) => received.closed));
    let shuttingDown = 0;
    for (const [i, { sent, received, closing }] of connections.entries()) {
      expect(received.error(), `connection ${i}`).toBeUndefined();
      const answers = parseResponses(received.text());
      expect(answers, `connection ${i}`).toHaveLength(sent);
      for (const answer of answers) {
        expect([200, 503]).toContain(answer.status);
        if (answer.status === 200) expect(JSON.parse(answer.body)).toEqual({ outputs: [{ dtype: 'float32', shape: [1], data: [3] }] });
        else expect(JSON.parse(answer.body).error.code).toBe('SHUTTING_DOWN');
        if (answer.status === 503) shuttingDown++;
      }
      expect(closing, `connection ${i} ends after an answer that says so`).toBe(true);
    }
    expect(written).toBeGreaterThanOrEqual(40);
    expect(shuttingDown).toBeGreaterThan(0);
    expect(server.stderr()).toBe('');
  }, 60_000);

  it('serves a program written by etna export-example, with the outputs a module gives in-process', async () => {
    const file = path.join(dir, 'encoder-decoder.pte');
    expect(runCli(['export-example', 'encoder-decoder', file]).status).toBe(0);
    const server = await startServer(file, { POOL_SIZE: '2' });
    const x = Array.from({ length: 32 }, (_, i) => Math.sin(i));
    const { status, json } = await post(
      `${server.url}/run/encode`,
      JSON.stringify({ inputs: [{ dtype: 'float32', shape: [1, 32], data: x }] }),
    );
    expect(status).toBe(200);
    const module = await Module.load(file);
    const [want] = (await module.execute('encode', [Tensor.float32([1, 32], x)])) as Tensor[];
    await module.dispose();
    expect(json.outputs).toEqual([{ dtype: 'float32', shape: [1, 8], data: Array.from(want!.data as Float32Array) }]);
    server.child.kill('SIGINT');
    expect(await server.exited).toEqual({ code: 0, signal: null });
  }, 60_000);

  it('answers 400 INVALID_INPUT for integers the dtype cannot hold, instead of running them wrapped', async () => {
    const server = await startServer(testdataPath('npr_dtypes.pte'), { POOL_SIZE: '1' });
    const run = `${server.url}/run/forward`;
    const request = (int64: string, float32 = '1.5'): string =>
      `{"inputs": [{"dtype": "int64", "shape": [1], "data": [${int64}]}, {"dtype": "float32", "shape": [1], "data": [${float32}]}]}`;
    // 2^64 + 1: written into a BigInt64Array as it is, it would run as token 1.
    // As a bare number, -2^63 - 1 parses to -2^63: in range, but not the value sent.
    for (const token of ['"18446744073709551617"', '18446744073709551617', '-9223372036854775809', '0.5']) {
      const { status, json } = await post(run, request(token));
      expect(status, token).toBe(400);
      expect(json.error.code, token).toBe('INVALID_INPUT');
      expect(json.error.message, token).toMatch(
        /^inputs\[0\]\.data\[0\] = .* (is outside the int64 range|is not an integer|is past 2\^53 - 1)/,
      );
    }
    // A token past 2^53, as a decimal string, runs exactly; the float input may be the string "NaN".
    const { status, json } = await post(run, request('"4611686018427387903"', '"NaN"'));
    expect(status).toBe(200);
    expect(json.outputs[0]).toEqual({ dtype: 'int64', shape: [1], data: ['9223372036854775806'] });
    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});

describe('examples/shared Pool, as examples/server uses it', () => {
  /** A module whose calls finish when the test says so. */
  function manualModule(name: string) {
    const pending: (() => void)[] = [];
    return {
      name,
      calls: 0,
      pending,
      execute(method: string) {
        this.calls++;
        return new Promise<string[]>((resolve) => pending.push(() => resolve([`${name}:${method}`])));
      },
    };
  }

  it('hands each call a free module, queues up to the limit, refuses beyond it, then serves the queue in order', async () => {
    const a = manualModule('a');
    const b = manualModule('b');
    const pool = new Pool([a, b], 1, { noun: 'module' });
    const run = (method: string) => pool.use((module: typeof a) => module.execute(method));
    const first = run('m1');
    const second = run('m2');
    const third = run('m3');
    await expect(run('m4')).rejects.toThrow(new PoolBusyError(2, 'module', 1));
    expect(pool.stats).toEqual({ size: 2, busy: 2, waiting: 1, queueLimit: 1 });
    expect([a.calls, b.calls]).toEqual([1, 1]);
    b.pending.shift()!();
    // The waiting call takes the module that came free.
    await expect(Promise.race([first, second])).resolves.toEqual(['b:m2']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(b.calls).toBe(2);
    a.pending.shift()!();
    b.pending.shift()!();
    await expect(Promise.all([first, second, third])).resolves.toEqual([['a:m1'], ['b:m2'], ['b:m3']]);
    expect(pool.stats).toEqual({ size: 2, busy: 0, waiting: 0, queueLimit: 1 });
  });

  it('close refuses new calls, serves those already waiting, and resolves when they have finished', async () => {
    const a = manualModule('a');
    const pool = new Pool([a], 1, { noun: 'module' });
    const run = (method: string) => pool.use((module: typeof a) => module.execute(method));
    const call = run('m1');
    const waiting = run('m2');
    let closed = false;
    const closing = pool.close().then(() => (closed = true));
    await expect(run('m3')).rejects.toBeInstanceOf(PoolClosedError);
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    a.pending.shift()!();
    await expect(call).resolves.toEqual(['a:m1']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    a.pending.shift()!();
    await expect(waiting).resolves.toEqual(['a:m2']);
    await closing;
    expect(closed).toBe(true);
  });
});
