// npm run test:differential -- [--count N] [--seed S] [--shrink K] [--save] [--quiet] [--graph I]
// Runs N random graphs from seed S through onnxruntime-node and both etna
// paths, prints every kind of disagreement found, shrinks the first K of each
// kind and, with --save, writes them under test/differential/regressions/.
// --graph I checks only graph I of the run (to reproduce one finding).
// Exits 1 when a disagreement is not in known-disagreements.json.
import { runCampaign } from './campaign.js';

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(process.argv[at + 1]);
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} takes a non-negative integer, got '${process.argv[at + 1] ?? ''}'`);
  return value;
}

const count = option('count', 1000);
const seed = option('seed', 1);
const quiet = process.argv.includes('--quiet');
const result = await runCampaign({
  count,
  seed,
  shrinkPerSignature: option('shrink', 1),
  save: process.argv.includes('--save'),
  only: process.argv.includes('--graph') ? option('graph', 0) : undefined,
  log: quiet ? undefined : (line) => console.log(line),
});
console.log(
  `\n${result.graphs} graphs (seed ${seed}) in ${result.seconds.toFixed(1)} s: ${(result.graphs / result.seconds).toFixed(1)} graphs/s; ${result.invalid} refused by onnxruntime; ${result.compared} elements compared, ${result.skipped} skipped as ill-conditioned`,
);
for (const f of result.findings) {
  console.log(
    `${String(f.count).padStart(6)}  ${f.known === undefined ? 'NEW  ' : 'known'}  ${f.key}${f.known === undefined ? '' : ` [${f.known}]`}${f.saved === undefined ? '' : `\n        saved ${f.saved}`}\n        e.g. ${f.example}`,
  );
}
if (result.unmatchedKnown.length > 0) console.log(`known entries nothing matched in this run: ${result.unmatchedKnown.join(', ')}`);
process.exitCode = result.unknown.length > 0 ? 1 : 0;
