// Latency with numThreads above 1, for the paddle2onnx-style graphs
// (dbnet-det, mobilenetv3-cls, svtr-rec) imported onto XNNPACK:
//   single       one module per graph, calls back to back: p50 / p95
//   paced        one module per graph, a call every 10 ms (a lightly loaded
//                server): p50 / p95 and the process's CPU time per call,
//                which counts pool workers spinning between calls
//   concurrent   N sessions of mobilenetv3-cls over one program, all calling
//                at once for up to 8 s: calls per second, p50 / p95 per call,
//                and the threads the sessions added to the process
//
//   npm run build && node bench/thread-pool.mjs single|paced|concurrent [--threads N] [--iterations N] [--sessions N] [--thread-pool shared|own]
import fs from 'node:fs';

const { Module, Program } = await import('../dist/index.js');
const { onnxGraphProgram } = await import('../dist/tools/bench-onnx-graphs.js');

const scenario = process.argv[2];
if (!['single', 'paced', 'concurrent'].includes(scenario)) throw new Error('first argument: single, paced or concurrent');
function option(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : fallback;
}
const numThreads = Number(option('threads', '2'));
const iterations = Number(option('iterations', '40'));
const sessionCount = Number(option('sessions', '16'));
const threadPool = option('thread-pool', 'shared');

const GRAPHS = ['dbnet-det', 'mobilenetv3-cls', 'svtr-rec'];
const threads = () => fs.readdirSync('/proc/self/task').length;
function percentile(samples, p) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}
const figures = (samples) => `p50 ${percentile(samples, 0.5).toFixed(2)} ms, p95 ${percentile(samples, 0.95).toFixed(2)} ms`;

async function timed(module, inputs) {
  const start = performance.now();
  await module.execute('forward', inputs);
  return performance.now() - start;
}

if (scenario === 'concurrent') {
  const graph = onnxGraphProgram('mobilenetv3-cls');
  const program = Program.load(graph.pte());
  const { inputs } = graph.calls()[0];
  const warm = await Module.load(program);
  await timed(warm, inputs); // starts libuv's pool before the count
  await warm.dispose();
  const before = threads();
  const sessions = await Promise.all(
    Array.from({ length: sessionCount }, () => Module.load(program, { numThreads, threadPool, shareMemoryArenas: true })),
  );
  for (const session of sessions) await timed(session, inputs);
  const samples = [];
  const start = performance.now();
  await Promise.all(
    sessions.map(async (session) => {
      for (let i = 0; i < iterations && performance.now() - start < 8000; i++) samples.push(await timed(session, inputs));
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  console.log(
    `${sessionCount} sessions at numThreads ${numThreads} (${threadPool}): ${threads() - before} threads added, ${(samples.length / seconds).toFixed(0)} calls/s, ${figures(samples)}`,
  );
} else {
  for (const name of GRAPHS) {
    const graph = onnxGraphProgram(name);
    const module = await Module.load(graph.pte(), { numThreads, threadPool });
    const { inputs } = graph.calls()[0];
    for (let i = 0; i < 10; i++) await timed(module, inputs);
    const samples = [];
    const cpuStart = process.cpuUsage();
    for (let i = 0; i < iterations; i++) {
      samples.push(await timed(module, inputs));
      if (scenario === 'paced') await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const cpu = process.cpuUsage(cpuStart);
    const perCall = scenario === 'paced' ? `, CPU ${((cpu.user + cpu.system) / 1000 / iterations).toFixed(2)} ms per call` : '';
    console.log(`${name} numThreads ${numThreads}: ${figures(samples)}${perCall}`);
    await module.dispose();
  }
}
