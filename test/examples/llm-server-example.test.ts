// examples/llm-server: started as a user would (a child process on loopback,
// an ephemeral port) on a small llama-8da4w program written in export_llama's
// forward layout with the Llama 2 tokenizer's vocabulary. Concurrent streams
// against the same requests run one at a time, malformed requests, a client
// that leaves, overload and SIGTERM, through OpenAI's routes.
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

import { startServerProcess, type ServerProcess } from '../helpers/server-process.js';
import { repoRoot } from '../helpers/testdata.js';
import { CONTEXT, modelPath, TOKENIZER } from '../serve/helpers.js';

const SERVER = path.join(repoRoot, 'examples/llm-server/server.mjs');

function startServer(args: string[], env: Record<string, string> = {}): Promise<ServerProcess> {
  return startServerProcess(
    [SERVER, '--model', modelPath(), '--tokenizer', TOKENIZER, '--model-name', 'llama', '--port', '0', ...args],
    env,
  );
}

/** The complete `data:` events at the start of an event stream: chunks, or the error object, or '[DONE]'. */
function parseEvents(text: string): any[] {
  const blocks = text.split('\n\n');
  blocks.pop();
  return blocks.map((block) => {
    const data = /^data: (.*)$/m.exec(block)![1]!;
    return data === '[DONE]' ? data : JSON.parse(data);
  });
}

/**
 * One streamed POST /v1/completions on its own connection, read as it streams:
 * `firstPiece` resolves at the first chunk, `ended` when the response has
 * been read (or the connection closed).
 */
function openStream(url: string, body: object) {
  const text = JSON.stringify({ model: 'llama', stream: true, stream_options: { include_usage: true }, ...body });
  let received = '';
  let status = 0;
  let headers: http.IncomingHttpHeaders = {};
  let firstPiece: () => void;
  const first = new Promise<void>((resolve) => (firstPiece = resolve));
  const request = http.request(`${url}/v1/completions`, {
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
        if (parseEvents(received).length > 0) firstPiece();
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

interface Streamed {
  pieces: string[];
  finish: string;
  usage: { prompt_tokens: number; completion_tokens: number };
}

async function generate(url: string, body: object): Promise<Streamed> {
  const stream = openStream(url, body);
  await stream.ended;
  const events = stream.events();
  expect(stream.status(), stream.body()).toBe(200);
  expect(stream.headers()['content-type']).toBe('text/event-stream; charset=utf-8');
  expect(events.at(-1), stream.body()).toBe('[DONE]');
  const chunks = events.slice(0, -2);
  const last = chunks.at(-1).choices[0];
  expect(last.text).toBe('');
  return { pieces: chunks.slice(0, -1).map((chunk) => chunk.choices[0].text), finish: last.finish_reason, usage: events.at(-2).usage };
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
    await new Promise((resolve) => setTimeout(resolve, 2));
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
  max_tokens: 6 + (i % 5) * 2,
  ...(i % 2 === 0
    ? { temperature: 0 }
    : { temperature: 0.6 + (i % 4) * 0.2, seed: 1000 + i, ...(i % 3 === 0 && { top_k: 40 }), ...(i % 3 === 1 && { top_p: 0.9 }) }),
  ...(i % 4 === 3 && { stop: ['e', 'a'] }),
}));

describe('examples/llm-server', () => {
  it('16 concurrent streams give what each gives alone; malformed requests get OpenAI errors; SIGTERM lets a running stream finish and exits 0', async () => {
    const server = await startServer(['--sessions', '4'], { MAX_QUEUE: '16' });
    expect(await health(server.url)).toMatchObject({
      model: { name: 'llama', layout: 'forward', vocabSize: 32000, maxContextLen: CONTEXT, maxSeqLen: 128 },
      pool: { size: 4, busy: 0, waiting: 0, queueLimit: 16 },
      generations: { finished: 0, aborted: 0, failed: 0 },
      stopping: false,
    });

    const together = await Promise.all(REQUESTS.map((body) => generate(server.url, body)));
    const alone: Streamed[] = [];
    for (const body of REQUESTS) alone.push(await generate(server.url, body));
    together.forEach((stream, i) => {
      expect(stream.pieces, PROMPTS[i]).toEqual(alone[i]!.pieces);
      expect(stream.finish, PROMPTS[i]).toBe(alone[i]!.finish);
      expect(stream.usage.completion_tokens).toBeLessThanOrEqual(REQUESTS[i]!.max_tokens);
      expect(['length', 'stop']).toContain(stream.finish);
      if (REQUESTS[i]!.stop !== undefined && stream.finish === 'stop') expect(stream.pieces.join('')).not.toMatch(/[ea]/);
    });
    // The requests differ, and so does what they generate.
    expect(new Set(together.map((stream) => stream.pieces.join(''))).size).toBeGreaterThan(12);

    const completions = `${server.url}/v1/completions`;
    const body = (fields: object) => JSON.stringify({ model: 'llama', prompt: 'a', ...fields });
    const malformed: [string, string, string | undefined, number, string, string | null][] = [
      ['POST', completions, '{"model": ', 400, 'invalid_json', null],
      ['POST', completions, '[1, 2]', 400, 'invalid_json', null],
      ['POST', completions, '{"prompt": "a"}', 400, 'missing_required_parameter', 'model'],
      ['POST', completions, body({ prompt: undefined }), 400, 'missing_required_parameter', 'prompt'],
      ['POST', completions, body({ temprature: 0 }), 400, 'unknown_parameter', 'temprature'],
      ['POST', completions, body({ prompt: 5 }), 400, 'invalid_type', 'prompt'],
      ['POST', completions, body({ max_tokens: 2.5 }), 400, 'invalid_type', 'max_tokens'],
      ['POST', completions, body({ top_k: 32001 }), 400, 'invalid_value', 'top_k'],
      ['POST', completions, body({ stop: [''] }), 400, 'invalid_value', 'stop[0]'],
      ['POST', completions, body({ stop: Array.from({ length: 17 }, () => 'x') }), 400, 'invalid_value', 'stop'],
      ['POST', completions, body({ prompt: 'word '.repeat(300), max_tokens: 4 }), 400, 'context_length_exceeded', 'prompt'],
      ['POST', completions, body({ model: 'gpt-4o' }), 404, 'model_not_found', 'model'],
      ['POST', completions, body({ prompt: 'x'.repeat(1_100_000) }), 413, 'request_too_large', null],
      ['GET', completions, undefined, 405, 'method_not_allowed', null],
      ['POST', `${server.url}/v1/models`, '{}', 405, 'method_not_allowed', null],
      ['POST', `${server.url}/v1/completions/more`, body({}), 404, 'not_found', null],
      ['GET', `${server.url}/`, undefined, 404, 'not_found', null],
    ];
    for (const [method, url, text, status, code, param] of malformed) {
      const answer = await request(url, method, text);
      const what = `${method} ${url} ${text?.slice(0, 60)}`;
      expect(answer.status, what).toBe(status);
      expect(answer.json.error, what).toEqual({ message: expect.stringMatching(/\S/), type: expect.any(String), param, code });
      if (status === 405) expect(answer.headers.get('allow'), what).toBe(url.endsWith('/v1/models') ? 'GET' : 'POST');
    }
    expect(await health(server.url)).toMatchObject({ pool: { busy: 0, waiting: 0 }, generations: { finished: 32, aborted: 0, failed: 0 } });

    // SIGTERM while a long stream runs: it finishes as it would have, a new request gets 503, the process exits 0.
    const long = { prompt: 'A long story', max_tokens: 200, temperature: 0 };
    const wanted = await generate(server.url, long);
    const inFlight = openStream(server.url, long);
    await inFlight.firstPiece;
    server.child.kill('SIGTERM');
    await until(server.url, (state) => state.stopping === true, 'the server to stop accepting');
    const refused = await request(completions, 'POST', body({}));
    expect(refused.status).toBe(503);
    expect(refused.json.error).toMatchObject({ type: 'server_error', code: 'shutting_down' });
    expect(refused.headers.get('connection')).toBe('close');
    await inFlight.ended;
    const events = inFlight.events();
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.slice(0, -3).map((chunk) => chunk.choices[0].text)).toEqual(wanted.pieces);
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.stdout()).toMatch(/SIGTERM: finishing running generations \(cutting them after 10000 ms\), then stopping\nstopped\n$/);
    expect(server.stderr()).toBe('');
  }, 60_000);

  it('a client that leaves aborts its generation and frees its session; a full line gets 429; SIGTERM past the deadline cuts running streams', async () => {
    const server = await startServer(['--sessions', '1', '--max-queue', '1', '--drain-timeout-ms', '0']);
    // As long a stream as the context allows, sampled over the whole vocabulary (slower than greedy), so it is
    // still running while the test leaves, queues and overloads.
    const long = (prompt: string) => ({ prompt, max_tokens: CONTEXT - 8, temperature: 1, seed: 1 });

    const leaving = openStream(server.url, long('The client goes away'));
    await leaving.firstPiece;
    leaving.leave();
    await until(server.url, (state) => state.generations.aborted === 1 && state.pool.busy === 0, 'the generation to be aborted');
    const after = await generate(server.url, { prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
    expect(after.finish).toBe('length');

    // One running, one waiting: the next is refused with 429 and Retry-After.
    const running = openStream(server.url, long('Running'));
    await running.firstPiece;
    const waiting = openStream(server.url, { prompt: 'Waiting', max_tokens: 4, temperature: 0 });
    await until(server.url, (state) => state.pool.waiting === 1, 'a request to wait');
    const overloaded = await request(`${server.url}/v1/completions`, 'POST', JSON.stringify({ model: 'llama', prompt: 'One too many' }));
    expect(overloaded.status).toBe(429);
    expect(overloaded.json.error).toMatchObject({ type: 'rate_limit_error', code: 'server_busy' });
    expect(overloaded.headers.get('retry-after')).toBe('1');
    // A waiting client that leaves gives up its place in line.
    waiting.leave();
    await until(server.url, (state) => state.pool.waiting === 0, 'the waiting request to leave the line');
    await running.ended;
    expect(running.events().at(-1)).toBe('[DONE]');
    expect(await health(server.url)).toMatchObject({ pool: { busy: 0, waiting: 0 }, generations: { finished: 2, aborted: 1 } });

    // With a drain deadline of 0, SIGTERM cuts the running stream, which ends with an error event.
    const cut = openStream(server.url, long('Cut short'));
    await cut.firstPiece;
    server.child.kill('SIGTERM');
    await cut.ended;
    const events = cut.events();
    expect(events.at(-1)).toEqual({
      error: { message: 'the server is shutting down', type: 'server_error', param: null, code: 'shutting_down' },
    });
    expect(events.length).toBeLessThan(CONTEXT - 8);
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
    const badSessions = await run(['--model', modelPath(), '--tokenizer', TOKENIZER, '--sessions', '0']);
    expect(badSessions.code).toBe(2);
    expect(badSessions.stderr).toMatch(/--sessions must be an integer from 1 to \d+, got '0'/);
    const notAModel = await run(['--model', TOKENIZER, '--tokenizer', TOKENIZER]);
    expect(notAModel.code).toBe(1);
    expect(notAModel.stderr).toMatch(/^llm-server: INVALID_PROGRAM: /);
  }, 60_000);
});
