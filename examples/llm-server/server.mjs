// An OpenAI-compatible text-generation server as a program of your own, over
// etna-runtime/serve: settings from options or the environment, one Llm,
// createServer() for the routes, sessions, prefix cache and state store, and
// a clean stop on SIGTERM/SIGINT. `etna serve` is the same server as a command.
//
//   node examples/llm-server/server.mjs --model llama.pte --tokenizer tokenizer.json
//   POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health
import { parseArgs } from 'node:util';

import { Llm } from 'etna-runtime/llm';
import { createServer, openStateStore } from 'etna-runtime/serve';

const SETTINGS = [
  // [option, environment variable, default, what it is]
  ['model', 'ETNA_MODEL', undefined, 'the .pte program (export_llama forward, or prefill/decode)'],
  ['tokenizer', 'ETNA_TOKENIZER', undefined, 'tokenizer.json or tiktoken tokenizer.model'],
  ['model-name', 'MODEL_NAME', 'etna', 'the name requests give as `model`'],
  ['host', 'HOST', '127.0.0.1', 'address to listen on'],
  ['port', 'PORT', '8080', 'port to listen on; 0 picks a free one (printed at start)'],
  ['sessions', 'SESSIONS', '2', 'sessions over the one model: generations that run at once'],
  ['max-queue', 'MAX_QUEUE', '16', 'requests that may wait for a session; beyond them 429'],
  ['state-store', 'STATE_STORE', undefined, 'a folder, or redis://HOST:PORT, where conversations wait between turns'],
  ['drain-timeout-ms', 'DRAIN_TIMEOUT_MS', '10000', 'on SIGTERM, how long running generations may go on before they are cut'],
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
      options: Object.fromEntries([...SETTINGS.map(([option]) => [option, { type: 'string' }]), ['help', { type: 'boolean' }]]),
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
  const integer = (option, min, max = Number.MAX_SAFE_INTEGER) => {
    const value = text(option);
    if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max)
      fail(`--${option} must be an integer from ${min} to ${max}, got '${value}'`);
    return Number(value);
  };
  const settings = {
    model: text('model'),
    tokenizer: text('tokenizer'),
    modelName: text('model-name'),
    host: text('host'),
    port: integer('port', 0, 65535),
    sessions: integer('sessions', 1),
    maxQueue: integer('max-queue', 0),
    stateStore: text('state-store'),
    drainTimeoutMs: integer('drain-timeout-ms', 0),
  };
  if (settings.model === undefined) fail('--model (or ETNA_MODEL) is required');
  if (settings.tokenizer === undefined) fail('--tokenizer (or ETNA_TOKENIZER) is required');
  return settings;
}

const config = readSettings();
let llm;
let stateStore;
let server;
try {
  llm = await Llm.load(config.model, { tokenizer: config.tokenizer });
  stateStore = config.stateStore === undefined ? undefined : await openStateStore(config.stateStore);
  server = await createServer({ llm, modelName: config.modelName, sessions: config.sessions, maxQueue: config.maxQueue, stateStore });
} catch (error) {
  console.error(`llm-server: ${error?.code ?? 'ERROR'}: ${error?.message ?? error}`);
  process.exit(1);
}

server.listen(config.port, config.host, () => {
  const { address, port } = server.address();
  const { layout, vocabSize, maxContextLen } = llm.metadata;
  console.log(
    `listening on http://${address}:${port} (${config.model} as '${config.modelName}': ${layout} layout, vocabulary ${vocabSize}, ` +
      `context ${maxContextLen}; ${config.sessions} sessions, queue limit ${config.maxQueue})`,
  );
});

let stopping = false;
async function stop(signal) {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: finishing running generations (cutting them after ${config.drainTimeoutMs} ms), then stopping`);
  await server.shutdown({ drainTimeoutMs: config.drainTimeoutMs });
  await stateStore?.close();
  await llm.dispose();
  console.log('stopped');
}
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => void stop(signal));
