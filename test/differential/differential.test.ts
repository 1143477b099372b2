// The differential tester's short run: a fixed seed's random ONNX graphs
// through onnxruntime-node, etna on portable kernels and etna on XNNPACK, and
// every saved regression replayed. A disagreement fails the test unless
// known-disagreements.json lists its kind with a reason.
import { describe, expect, it } from 'vitest';

import { runCampaign } from './campaign.js';
import { loadRegressions, matchKnown, readKnown } from './known.js';
import { checkModel } from './runner.js';

const SHORT_RUN = { count: 500, seed: 20261203 };

describe('differential tester against onnxruntime-node', () => {
  it(`agrees on ${SHORT_RUN.count} random graphs (seed ${SHORT_RUN.seed}) apart from known disagreements`, async () => {
    const result = await runCampaign(SHORT_RUN);
    const byEntry = new Map<string, number>();
    for (const f of result.findings) if (f.known !== undefined) byEntry.set(f.known, (byEntry.get(f.known) ?? 0) + f.count);
    if (byEntry.size > 0)
      console.log(['known disagreements seen (graphs x entry):', ...[...byEntry].map(([id, n]) => `  ${n} x ${id}`)].join('\n'));
    expect(result.invalid).toBe(0);
    expect(result.compared).toBeGreaterThan(result.skipped);
    expect(result.unknown.map((f) => `${f.key}: ${f.example}`)).toEqual([]);
  }, 120_000);

  const regressions = loadRegressions();
  it('has saved regressions to replay', () => {
    expect(regressions.length).toBeGreaterThan(0);
  });

  it.each(regressions.map((r) => [r.name, r] as const))('replays %s', async (_name, r) => {
    const result = await checkModel(r.model, r.spec, r.feeds);
    expect(result.invalid).toBeUndefined();
    const known = readKnown();
    const unexplained: string[] = [];
    for (const d of result.disagreements) {
      if (
        (await matchKnown(known, d, { ops: r.regression.ops, feeds: r.feeds, model: r.model, tolerance: r.spec.tolerance })) === undefined
      )
        unexplained.push(`${d.path}: ${d.detail}`);
    }
    expect(unexplained).toEqual([]);
  });
});
