// A text-generation server over node:http: one Llm (one Program, weights
// packed once), a pool of sessions over it, a bounded wait line (429 when
// full), generated text streamed as Server-Sent Events, a client that goes
// away stopping its generation, and a clean stop on SIGTERM/SIGINT.
//
//   node examples/llm-server/server.mjs --model llama.pte --tokenizer tokenizer.json
//   POST /generate  {"prompt": "...", "maxNewTokens", "temperature", "topK", "topP", "seed", "stop"}
//                   -> text/event-stream: `piece` events {"text"}, then one `done` event with the result
//   GET  /health    -> {"model": {...}, "pool": {...}, "generations": {...}}
import http from 'node:http';
import { parseArgs } from 'node:util';

import { EtnaError } from 'etna-runtime';
import { Llm } from 'etna-runtime/llm';

import { Pool, PoolBusyError, PoolClosedError } from '../shared/pool.mjs';
import { parseGenerateRequest, RequestError } from './request.mjs';

/** How long a stopping server still reads requests on idle connections before closing them. */
const IDLE_CLOSE_DELAY_MS = 200;
/** After the listener has closed, how long busy connections get to finish their answer before they are closed. */
const CLOSE_GRACE_MS = 1000;

// ---------------------------------------------------------------- settings

const SETTINGS = [
  // [option, environment variable, default, what it is]
  ['model', 'ETNA_MODEL', undefined, 'the .pte program (export_llama forward, or prefill/decode)'],
  ['tokenizer', 'ETNA_TOKENIZER', undefined, 'tokenizer.json or tiktoken tokenizer.model'],
  ['host', 'HOST', '127.0.0.1', 'address to listen on'],
  ['port', 'PORT', '8080', 'port to listen on; 0 picks a free one (printed at start)'],
  ['pool-size', 'POOL_SIZE', '2', 'sessions over the one model: generations that run at once'],
  ['queue-limit', 'QUEUE_LIMIT', '16', 'requests that may wait for a session; beyond it 429'],
  ['threads', 'THREADS', '1', 'XNNPACK threads per session'],
  ['num-bos', 'NUM_BOS', undefined, "BOS tokens before each prompt (default as generate()'s: 1 when the tokenizer adds one, else 0)"],
  ['drain-timeout-ms', 'DRAIN_TIMEOUT_MS', '10000', 'on SIGTERM, how long running streams may go on before they are aborted'],
  ['max-body-bytes', 'MAX_BODY_BYTES', '1048576', 'larger request bodies get 413'],
];

function usage() {
  const lines = [
    'usage: node examples/llm-server/server.mjs --model MODEL.pte --tokenizer TOKENIZER [options]',
    '',
    'options (or environment variables):',
  ];
  for (const [option, variable, fallback, help] of SETTINGS) {
    lines.push(`  --${option.padEnd(17)} ${variable.padEnd(17)} ${help}${fallback === undefined ? '' : ` (default ${fallback})`}`);
  }
  return lines.join('\n');
}

function fail(message) {
  console.error(`llm-server: ${message}\n\n${usage()}`);
  process.exit(2);
}

function readSettings() {
  let parsed;
  try {
    parsed = parseArgs({
      options: Object.fromEntries([...SETTINGS.map(([option]) => [option, { type: 'string' }]), ['help', { type: 'boolean', short: 'h' }]]),
    });
  } catch (error) {
    fail(error.message);
  }
  if (parsed.values.help) {
    console.log(usage());
    process.exit(0);
  }
  const text = (option) => {
    const [, variable, fallback] = SETTINGS.find(([name]) => name === option);
    const value = parsed.values[option] ?? process.env[variable];
    return value === undefined || value === '' ? fallback : value;
  };
  const integer = (option, min) => {
    const value = text(option);
    if (value === undefined) return undefined;
    const number = Number(value);
    if (value.trim() === '' || !Number.isSafeInteger(number) || number < min)
      fail(`--${option} must be an integer >= ${min}, got '${value}'`);
    return number;
  };
  const settings = {
    model: text('model'),
    tokenizer: text('tokenizer'),
    host: text('host'),
    port: integer('port', 0),
    poolSize: integer('pool-size', 1),
    queueLimit: integer('queue-limit', 0),
    threads: integer('threads', 1),
    numBos: integer('num-bos', 0),
    drainTimeoutMs: integer('drain-timeout-ms', 0),
    maxBodyBytes: integer('max-body-bytes', 1),
  };
  if (settings.model === undefined) fail('--model (or ETNA_MODEL) is required');
  if (settings.tokenizer === undefined) fail('--tokenizer (or ETNA_TOKENIZER) is required');
  if (settings.port > 65535) fail(`--port must be at most 65535, got ${settings.port}`);
  return settings;
}

const config = readSettings();

// ---------------------------------------------------------------- HTTP

/** Requests received and not yet answered, per connection (see answerHeaders). */
const openRequests = new WeakMap();
let stopping = false;

/**
 * While stopping, the answer to the last request received on a connection
 * ends it, so no client sends another there; requests already received
 * behind it (pipelined) are answered first.
 */
function answerHeaders(response, headers) {
  return stopping && openRequests.get(response.req.socket) === 1 ? { ...headers, connection: 'close' } : headers;
}

function sendJson(response, status, body, headers = {}) {
  const text = JSON.stringify(body);
  response.writeHead(
    status,
    answerHeaders(response, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers }),
  );
  response.end(text);
}

function readBody(request, limit) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    request.on('data', (chunk) => {
      size += chunk.length;
      // Past the limit the rest is read and dropped, so the answer can still be sent.
      if (size <= limit) chunks.push(chunk);
    });
    request.on('end', () => {
      if (size > limit) reject(new RequestError(413, 'TOO_LARGE', `the request body is larger than ${limit} bytes`));
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
    request.on('error', reject);
  });
}

/** Writes one event; waits while the client is slower than the model (the generation goes on meanwhile). */
function writeEvent(response, event, data) {
  if (response.destroyed) return Promise.resolve();
  if (response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      response.off('drain', done);
      response.off('close', done);
      resolve();
    };
    response.on('drain', done);
    response.on('close', done);
  });
}

const resultJson = ({ promptTokens, tokens, text, stopReason, stats }) => ({ promptTokens, tokens, text, stopReason, stats });

// ---------------------------------------------------------------- generation

/** Generations by how they ended, for /health. */
const generations = { finished: 0, aborted: 0, failed: 0 };
/** The AbortController of every request between its body and its last event: aborted by a client leaving, or by the drain deadline. */
const inFlight = new Set();

/**
 * Streams one generation as events. The 200 and the event stream begin with
 * the first piece (or the result), so what generate() refuses before its
 * first call (a prompt the context cannot hold) is still answered 400.
 * Returns once the generation has ended, so the session is free again.
 */
async function stream(response, session, { prompt, options }, signal) {
  const generation = session.generate(prompt, { ...options, ...(config.numBos !== undefined && { numBos: config.numBos }), signal });
  let started = false;
  const start = () => {
    if (started) return;
    started = true;
    response.writeHead(200, answerHeaders(response, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' }));
  };
  try {
    for await (const piece of generation) {
      start();
      await writeEvent(response, 'piece', { text: piece });
    }
    const result = await generation;
    generations[result.stopReason === 'aborted' ? 'aborted' : 'finished']++;
    start();
    await writeEvent(response, 'done', resultJson(result));
    response.end();
  } catch (error) {
    // Leaving the loop early stops the generation; it is over once its result has settled.
    await generation.result.catch(() => undefined);
    if (!started) throw error;
    generations.failed++;
    console.error(`llm-server: generation failed: ${error?.code ?? 'INTERNAL'}: ${error?.message ?? error}`);
    await writeEvent(response, 'error', { code: error?.code ?? 'INTERNAL', message: error?.message ?? String(error) });
    response.end();
  }
}

async function handleGenerate(request, response, llm, pool) {
  const body = parseGenerateRequest(await readBody(request, config.maxBodyBytes), llm.metadata);
  const controller = new AbortController();
  // The response closes before it has finished only when the client has gone.
  response.on('close', () => {
    if (!response.writableFinished) controller.abort(new Error('the client closed the connection'));
  });
  inFlight.add(controller);
  try {
    let session;
    try {
      session = await pool.acquire(controller.signal);
    } catch (error) {
      // The client left while waiting in line: nobody to answer.
      if (controller.signal.aborted && error === controller.signal.reason) return;
      throw error;
    }
    try {
      await stream(response, session, body, controller.signal);
    } finally {
      pool.release(session);
    }
  } finally {
    inFlight.delete(controller);
  }
}

const ROUTES = { '/generate': 'POST', '/health': 'GET' };

/** The answer to a request that failed before its event stream began. */
function errorAnswer(error) {
  if (error instanceof RequestError)
    return [
      error.status,
      { code: error.code, message: error.message, ...(error.field !== undefined && { field: error.field }) },
      error.headers ?? {},
    ];
  if (error instanceof PoolBusyError) return [429, { code: error.code, message: error.message }, { 'retry-after': '1' }];
  if (error instanceof PoolClosedError) return [503, { code: error.code, message: error.message }, {}];
  // What generate() refuses before its first call: the prompt does not fit the context, no BOS token to add ...
  if (error instanceof EtnaError && error.code === 'INVALID_INPUT') return [400, { code: error.code, message: error.message }, {}];
  return [500, { code: error?.code ?? 'INTERNAL', message: error?.message ?? String(error) }, {}];
}

function serve(llm, pool) {
  return http.createServer(async (request, response) => {
    const { socket } = request;
    openRequests.set(socket, (openRequests.get(socket) ?? 0) + 1);
    response.on('close', () => openRequests.set(socket, openRequests.get(socket) - 1));
    try {
      const { pathname } = new URL(request.url, 'http://localhost');
      const allowed = Object.hasOwn(ROUTES, pathname) ? ROUTES[pathname] : undefined;
      if (allowed === undefined) {
        throw new RequestError(
          404,
          'NOT_FOUND',
          `no route for ${request.method} ${pathname} (routes: ${Object.entries(ROUTES)
            .map(([path, method]) => `${method} ${path}`)
            .join(', ')})`,
        );
      }
      if (request.method !== allowed) {
        const error = new RequestError(405, 'METHOD_NOT_ALLOWED', `${pathname} takes ${allowed}, not ${request.method}`);
        error.headers = { allow: allowed };
        throw error;
      }
      if (pathname === '/health') {
        const { layout, vocabSize, maxContextLen, maxSeqLen } = llm.metadata;
        sendJson(response, 200, { model: { layout, vocabSize, maxContextLen, maxSeqLen }, pool: pool.stats, generations, stopping });
        return;
      }
      if (stopping) throw new PoolClosedError();
      await handleGenerate(request, response, llm, pool);
    } catch (error) {
      const [status, body, headers] = errorAnswer(error);
      if (status === 500) console.error(`llm-server: ${body.code}: ${body.message}`);
      if (response.headersSent || response.destroyed) return;
      sendJson(response, status, { error: body }, headers);
    }
  });
}

// ---------------------------------------------------------------- start and stop

let llm;
try {
  llm = await Llm.load(config.model, { tokenizer: config.tokenizer, numThreads: config.threads });
} catch (error) {
  console.error(`llm-server: ${error?.code ?? 'ERROR'}: ${error?.message ?? error}`);
  process.exit(1);
}
if (config.numBos > 0 && llm.metadata.bosId === undefined)
  fail(`--num-bos is ${config.numBos}, but neither ${config.model} nor ${config.tokenizer} names a BOS token`);
const sessions = await Promise.all(Array.from({ length: config.poolSize }, () => llm.session()));
// A session comes back reset, so the next request starts from an empty context, as on a fresh session.
const pool = new Pool(sessions, config.queueLimit, { noun: 'session', onReturn: (session) => session.reset() });
const server = serve(llm, pool);

server.listen(config.port, config.host, () => {
  const { address, port } = server.address();
  const host = address.includes(':') ? `[${address}]` : address;
  const { layout, vocabSize, maxContextLen } = llm.metadata;
  console.log(
    `listening on http://${host}:${port} (${config.model}: ${layout} layout, vocabulary ${vocabSize}, context ${maxContextLen}; ${config.poolSize} sessions, queue limit ${config.queueLimit})`,
  );
});

async function stop(signal) {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: finishing running generations (aborting them after ${config.drainTimeoutMs} ms), then stopping`);
  // From now on new requests, and those waiting for a session, get 503: the
  // server keeps listening while streams drain, so a client is told to go
  // elsewhere rather than refused a connection.
  const drained = pool.close({ turnAwayWaiting: true });
  const deadline = setTimeout(() => {
    for (const controller of inFlight) controller.abort(new Error('the server is shutting down'));
  }, config.drainTimeoutMs);
  await drained;
  clearTimeout(deadline);
  // A keep-alive client may have sent a request on a connection that looks
  // idle here, and closing a connection that holds a request resets it: wait
  // briefly for requests on their way (they get 503 and `connection: close`),
  // then stop listening and close the idle connections (server.close does).
  await new Promise((resolve) => setTimeout(resolve, IDLE_CLOSE_DELAY_MS));
  const closed = new Promise((resolve) => server.close(resolve));
  const grace = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS).unref();
  await closed;
  clearTimeout(grace);
  await Promise.all(sessions.map((session) => session.dispose()));
  await llm.dispose();
  console.log('stopped');
}
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => void stop(signal));
