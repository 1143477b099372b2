// A small JSON inference server over node:http: one Program, a pool of
// modules over it, a bounded wait list (503 when full), 400 with the
// EtnaError's code and message for malformed requests, and a clean stop on
// SIGTERM/SIGINT. For stateless models; see docs/serving.md for stateful ones.
//
//   node examples/server/server.mjs MODEL.pte
//   POST /run/{method}   {"inputs": [{"dtype": "float32", "shape": [1], "data": [2]}, ...]}
//                        -> {"outputs": [{"dtype", "shape", "data"}, ...]}
//   GET  /health         -> {"methods": [...], "pool": {size, busy, waiting, queueLimit}}
import http from 'node:http';

import { EtnaError, Module, Program, Tensor } from 'etna-runtime';
import { Pool, PoolBusyError, PoolClosedError } from 'etna-runtime/serve';

const HOST = '127.0.0.1';
/** How long a stopping server still reads requests on idle connections before closing them. */
const IDLE_CLOSE_DELAY_MS = 200;

function integerSetting(name, fallback, min) {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) {
    console.error(`server: ${name} must be an integer >= ${min}, got '${text}'`);
    process.exit(2);
  }
  return value;
}

const config = {
  program: process.argv[2] ?? process.env.ETNA_PROGRAM,
  port: integerSetting('PORT', 8080, 0),
  poolSize: integerSetting('POOL_SIZE', 4, 1),
  queueLimit: integerSetting('QUEUE_LIMIT', 64, 0),
  maxBodyBytes: integerSetting('MAX_BODY_BYTES', 16 * 1024 * 1024, 1),
};
if (config.program === undefined) {
  console.error(
    'usage: node examples/server/server.mjs MODEL.pte   (or ETNA_PROGRAM=MODEL.pte)\n' +
      'environment: PORT (default 8080, 0 = any free port), POOL_SIZE (4), QUEUE_LIMIT (64), MAX_BODY_BYTES (16 MiB)',
  );
  process.exit(2);
}

// ---------------------------------------------------------------- JSON <-> values

/**
 * A JSON input as the module takes it. Tensor data goes through Tensor.from,
 * which converts every element exactly or refuses it (INVALID_INPUT naming
 * inputs[i].data[k]): a token past int64, a fraction for an integer dtype,
 * 300 for uint8. Module.execute then compares dtype and shape with the
 * method and names any difference.
 */
function inputFromJson(json, where) {
  if (json === null || typeof json !== 'object') return json;
  const { dtype, shape, data } = json;
  if (typeof dtype !== 'string') throw new EtnaError('INVALID_INPUT', `${where}.dtype must be a string`);
  if (!Array.isArray(shape) || !shape.every((d) => Number.isInteger(d) && d >= 0)) {
    throw new EtnaError('INVALID_INPUT', `${where}.shape must be an array of non-negative integers`);
  }
  if (!Array.isArray(data)) throw new EtnaError('INVALID_INPUT', `${where}.data must be an array`);
  return Tensor.from(dtype, shape, data, `${where}.data`);
}

function outputToJson(value) {
  const number = (v) => (typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v);
  if (value instanceof Tensor) return { dtype: value.dtype, shape: [...value.shape], data: Array.from(value.data, number) };
  return number(value);
}

// ---------------------------------------------------------------- HTTP

class HttpError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function send(response, status, body, headers = {}) {
  const text = JSON.stringify(body);
  // While stopping, the answer to the last request received on a connection
  // ends it, so no client sends another; requests already received behind it
  // (pipelined) are answered first.
  const connection = stopping && openRequests.get(response.req.socket) === 1 ? { connection: 'close' } : {};
  response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...connection, ...headers });
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
      if (size > limit) reject(new HttpError(413, 'TOO_LARGE', `request body is larger than ${limit} bytes`));
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
    request.on('error', reject);
  });
}

/** 400 for what the client got wrong, 503 when busy, 500 for the rest. */
function statusOf(error) {
  if (error instanceof HttpError) return error.status;
  if (error instanceof PoolBusyError || error instanceof PoolClosedError) return 503;
  if (error instanceof EtnaError && (error.code === 'INVALID_INPUT' || error.code === 'METHOD_NOT_FOUND')) return 400;
  return 500;
}

function methodFromPath(segment) {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'INVALID_INPUT', `'${segment}' in the path is not a valid percent-encoded method name`);
  }
}

async function handleRun(request, pool, method) {
  // Metadata comes from the Program, so a bad request never takes a module.
  modules[0].methodMeta(method);
  const text = await readBody(request, config.maxBodyBytes);
  let body;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new EtnaError('INVALID_INPUT', `request body is not JSON: ${error.message}`);
  }
  if (body === null || typeof body !== 'object' || !Array.isArray(body.inputs)) {
    throw new EtnaError('INVALID_INPUT', 'request body must be {"inputs": [...]}');
  }
  const inputs = body.inputs.map((input, i) => inputFromJson(input, `inputs[${i}]`));
  const outputs = await pool.use((module) => module.execute(method, inputs));
  return { outputs: outputs.map(outputToJson) };
}

/** Requests received and not yet answered, per connection. */
const openRequests = new WeakMap();

function serve(pool) {
  return http.createServer(async (request, response) => {
    const { socket } = request;
    openRequests.set(socket, (openRequests.get(socket) ?? 0) + 1);
    response.on('close', () => openRequests.set(socket, openRequests.get(socket) - 1));
    try {
      const url = new URL(request.url, `http://${HOST}`);
      const run = /^\/run\/([^/]+)$/.exec(url.pathname);
      if (run !== null && request.method === 'POST') {
        send(response, 200, await handleRun(request, pool, methodFromPath(run[1])));
      } else if (url.pathname === '/health' && request.method === 'GET') {
        send(response, 200, { methods: modules[0].methodNames, pool: pool.stats });
      } else {
        throw new HttpError(404, 'NOT_FOUND', `no route for ${request.method} ${url.pathname} (try POST /run/{method} or GET /health)`);
      }
    } catch (error) {
      const status = statusOf(error);
      const code = error?.code ?? 'INTERNAL';
      if (status === 500) console.error(`server: ${code}: ${error?.message ?? error}`);
      send(response, status, { error: { code, message: error?.message ?? String(error) } }, status === 503 ? { 'retry-after': '1' } : {});
    }
  });
}

// ---------------------------------------------------------------- start and stop

const program = Program.load(config.program);
const modules = await Promise.all(Array.from({ length: config.poolSize }, () => Module.load(program)));
const pool = new Pool(modules, config.queueLimit, { noun: 'module' });
const server = serve(pool);

server.listen(config.port, HOST, () => {
  const { port } = server.address();
  console.log(
    `listening on http://${HOST}:${port} (${config.program}: ${modules[0].methodNames.join(', ')}; ${config.poolSize} modules, queue limit ${config.queueLimit})`,
  );
});

let stopping = false;
async function stop(signal) {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: finishing running calls, then stopping`);
  // New calls are refused (503) from now on; running and queued ones finish.
  const drained = pool.close();
  // A keep-alive client may have sent a request on a connection that looks
  // idle here, and closing a connection that holds a request resets it. Every
  // answer from now on ends its connection (see send), so wait briefly for
  // requests on their way to arrive, then stop listening and close the idle
  // connections. Busy ones close after their answer, or after a grace period.
  await new Promise((resolve) => setTimeout(resolve, IDLE_CLOSE_DELAY_MS));
  const closed = new Promise((resolve) => server.close(resolve));
  const grace = setTimeout(() => server.closeAllConnections(), 5000).unref();
  await drained;
  await closed;
  clearTimeout(grace);
  await Promise.all(modules.map((module) => module.dispose()));
  console.log('stopped');
}
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => void stop(signal));
