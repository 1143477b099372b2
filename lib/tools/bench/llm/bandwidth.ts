// The machine's memory read bandwidth, measured the way a decode step reads
// weights: a streaming read of a buffer far larger than the caches, with
// 128-bit loads. Each thread is a worker running a tiny WebAssembly function
// that adds its slice of a shared memory into four i64x2 accumulators (64
// bytes an iteration; integer adds so the loop is bound by loads, not by
// floating-point latency). The buffer is written first, so every page is
// resident and no read hits the kernel's shared zero page. The figure is the
// best of several trials of (bytes read by all threads) / (wall time from the
// start signal to the last thread's end).
import { Worker } from 'node:worker_threads';

import { EtnaError } from '../../../errors.js';

/** Bytes streamed by each trial: far beyond any L3 cache. */
export const BANDWIDTH_BUFFER_BYTES = 512 * 1024 * 1024;
const WASM_PAGE = 64 * 1024;

const leb = (value: number): number[] => {
  const out: number[] = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    out.push(byte);
  } while (value !== 0);
  return out;
};
const section = (id: number, body: number[]): number[] => [id, ...leb(body.length), ...body];
const name = (text: string): number[] => [...leb(text.length), ...Array.from(text, (c) => c.charCodeAt(0))];

/**
 * `sum(from, end) -> i64`: the sum of the 64-bit lanes of memory[from, end),
 * read 64 bytes an iteration (end - from: a positive multiple of 64), over
 * an imported shared memory of `pages` pages.
 */
export function streamingSumModule(pages: number): Uint8Array<ArrayBuffer> {
  const OP = {
    get: 0x20,
    set: 0x21,
    tee: 0x22,
    i32const: 0x41,
    i32add: 0x6a,
    i32ltu: 0x49,
    brIf: 0x0d,
    i64add: 0x7c,
    end: 0x0b,
    loop: 0x03,
    simd: 0xfd,
  } as const;
  const V128_LOAD = 0x00;
  const I64X2_ADD = [0xce, 0x01];
  const I64X2_EXTRACT_LANE = 0x1d;
  const load = (accumulator: number, offset: number): number[] => [
    OP.get,
    accumulator,
    OP.get,
    0,
    OP.simd,
    V128_LOAD,
    4,
    ...leb(offset),
    OP.simd,
    ...I64X2_ADD,
    OP.set,
    accumulator,
  ];
  const body = [
    1,
    4,
    0x7b, // four v128 locals: 2..5
    OP.loop,
    0x40,
    ...load(2, 0),
    ...load(3, 16),
    ...load(4, 32),
    ...load(5, 48),
    // i32.const takes signed LEB128: 64 is two bytes.
    OP.get,
    0,
    OP.i32const,
    0xc0,
    0x00,
    OP.i32add,
    OP.tee,
    0,
    OP.get,
    1,
    OP.i32ltu,
    OP.brIf,
    0,
    OP.end,
    OP.get,
    2,
    OP.get,
    3,
    OP.simd,
    ...I64X2_ADD,
    OP.get,
    4,
    OP.simd,
    ...I64X2_ADD,
    OP.get,
    5,
    OP.simd,
    ...I64X2_ADD,
    OP.tee,
    2,
    OP.simd,
    I64X2_EXTRACT_LANE,
    0,
    OP.get,
    2,
    OP.simd,
    I64X2_EXTRACT_LANE,
    1,
    OP.i64add,
    OP.end,
  ];
  const SHARED_WITH_MAX = 0x03;
  return new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, [1, 0x60, 2, 0x7f, 0x7f, 1, 0x7e]),
    ...section(2, [1, ...name('env'), ...name('memory'), 0x02, SHARED_WITH_MAX, ...leb(pages), ...leb(pages)]),
    ...section(3, [1, 0]),
    ...section(7, [1, ...name('sum'), 0x00, 0]),
    ...section(10, [1, ...leb(body.length), ...body]),
  ]);
}

// The worker: instantiates the module over the shared memory, says it is ready,
// then on each `run` message streams its slice `passes` times and reports.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { module, memory, from, end } = workerData;
const { sum } = new WebAssembly.Instance(module, { env: { memory } }).exports;
parentPort.on('message', (passes) => {
  let checksum = 0n;
  for (let p = 0; p < passes; p++) checksum += sum(from, end);
  parentPort.postMessage(String(checksum));
});
parentPort.postMessage('ready');
`;

export interface BandwidthFigures {
  readonly threads: number;
  /** Best trial, bytes per second. */
  readonly bytesPerSecond: number;
  readonly bufferBytes: number;
}

/** Measures streaming read bandwidth with `threads` workers (each its own slice of one buffer). */
export async function measureReadBandwidth(
  threads: number,
  options: { bufferBytes?: number; passes?: number; trials?: number } = {},
): Promise<BandwidthFigures> {
  const bufferBytes = options.bufferBytes ?? BANDWIDTH_BUFFER_BYTES;
  const passes = options.passes ?? 4;
  const trials = options.trials ?? 5;
  if (!Number.isInteger(threads) || threads < 1) {
    throw new EtnaError('INVALID_INPUT', `bandwidth: threads must be an integer >= 1, got ${threads}`);
  }
  if (bufferBytes % (64 * threads) !== 0 || bufferBytes % WASM_PAGE !== 0) {
    throw new EtnaError(
      'INVALID_INPUT',
      `bandwidth: ${bufferBytes} bytes do not split into ${threads} slices of whole 64-byte lines and pages`,
    );
  }
  const pages = bufferBytes / WASM_PAGE;
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  // Touch every page with data that is not zero.
  const words = new Uint32Array(memory.buffer);
  for (let i = 0; i < words.length; i++) words[i] = i * 2654435761;
  const module = new WebAssembly.Module(streamingSumModule(pages));
  const slice = bufferBytes / threads;
  const workers = Array.from(
    { length: threads },
    (_, t) => new Worker(WORKER_SOURCE, { eval: true, workerData: { module, memory, from: t * slice, end: (t + 1) * slice } }),
  );
  const next = (worker: Worker): Promise<string> =>
    new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  try {
    await Promise.all(workers.map(next));
    let best = 0;
    // One untimed pass warms the code and the TLB.
    await Promise.all(
      workers.map((w) => {
        const done = next(w);
        w.postMessage(1);
        return done;
      }),
    );
    for (let trial = 0; trial < trials; trial++) {
      const started = process.hrtime.bigint();
      await Promise.all(
        workers.map((w) => {
          const done = next(w);
          w.postMessage(passes);
          return done;
        }),
      );
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      best = Math.max(best, (bufferBytes * passes) / seconds);
    }
    return { threads, bytesPerSecond: best, bufferBytes };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}
