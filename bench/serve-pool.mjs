// Throughput of a pool of modules over one Program (docs/serving.md): calls
// per second on et_add.pte with 1, 2 and 4 modules, each pool kept full by
// `--concurrency` callers for `--seconds`. In-process by default (the pool
// of etna-runtime/serve, lib/serve/pool.ts); with --http, end to end through the example server
// started as a child process, driven with fetch over loopback.
// Sizes are interleaved over --rounds rounds, so a burst of load elsewhere on
// the machine hits every size alike; the median and best rounds are printed.
// Usage: node bench/serve-pool.mjs [PTE] [--modules 1,2,4] [--seconds N] [--concurrency N] [--rounds N] [--http]
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';

import { Module, Program, Tensor } from '../dist/index.js';
import { Pool } from '../dist/serve/index.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    modules: { type: 'string', default: '1,2,4' },
    seconds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '3' },
    http: { type: 'boolean', default: false },
  },
});
const programPath = [positionals[0], 'test/fixtures/pte/et_add.pte'].find((p) => p !== undefined && existsSync(p));
if (programPath === undefined) throw new Error('et_add.pte not found; pass its path');
const sizes = values.modules.split(',').map(Number);
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
const rounds = Number(values.rounds);

/** Runs `call` from `concurrency` loops for `seconds`; returns calls per second. */
async function drive(call) {
  const end = performance.now() + seconds * 1000;
  let calls = 0;
  const loop = async (k) => {
    for (let i = k; performance.now() < end; i += concurrency) {
      await call(i);
      calls++;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, k) => loop(k)));
  return calls / ((performance.now() - start) / 1000);
}

async function inProcess(size) {
  const program = Program.load(programPath);
  const modules = await Promise.all(Array.from({ length: size }, () => Module.load(program)));
  const pool = new Pool(modules, concurrency, { noun: 'module' });
  const call = (i) => pool.use((module) => module.execute('forward', [Tensor.float32([1], [i]), Tensor.float32([1], [1])]));
  await drive(call); // warm-up
  const rate = await drive(call);
  await Promise.all(modules.map((module) => module.dispose()));
  return rate;
}

async function overHttp(size) {
  const server = spawn(process.execPath, ['examples/server/server.mjs', programPath], {
    env: { ...process.env, PORT: '0', POOL_SIZE: String(size), QUEUE_LIMIT: String(concurrency) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (\S+)/.exec(out);
      if (match) resolve(match[1]);
    });
    server.on('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  const call = async (i) => {
    const body = JSON.stringify({
      inputs: [
        { dtype: 'float32', shape: [1], data: [i] },
        { dtype: 'float32', shape: [1], data: [1] },
      ],
    });
    const response = await fetch(`${url}/run/forward`, { method: 'POST', body });
    if (response.status !== 200) throw new Error(`status ${response.status}: ${await response.text()}`);
    await response.arrayBuffer();
  };
  await drive(call); // warm-up
  const rate = await drive(call);
  server.kill('SIGTERM');
  await new Promise((resolve) => server.on('exit', resolve));
  return rate;
}

console.log(
  `${values.http ? 'HTTP, example server' : 'in-process pool'}: ${programPath}, ${concurrency} callers, ${rounds} rounds of ${seconds} s per size, ` +
    `UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE ?? '4 (default)'}, ${os.cpus().length} cores, node ${process.version}`,
);
const rates = new Map(sizes.map((size) => [size, []]));
for (let round = 0; round < rounds; round++) {
  for (const size of sizes) rates.get(size).push(values.http ? await overHttp(size) : await inProcess(size));
}
const format = (rate) => Math.round(rate).toLocaleString('en-US');
for (const [size, measured] of rates) {
  measured.sort((a, b) => a - b);
  console.log(
    `  ${size} module${size === 1 ? ' ' : 's'}: median ${format(measured[Math.floor(measured.length / 2)])} calls/s, best ${format(measured.at(-1))}`,
  );
}
