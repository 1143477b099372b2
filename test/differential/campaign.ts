// A run of many random graphs from one seed: each graph checked, each
// disagreement matched against the known list, and the first failures of
// each kind shrunk (and saved, on request) as regressions.
import { buildGraph, randomRecipe, Rng, OPSET } from './generator.js';
import { matchKnown, readKnown, saveRegression, type KnownDisagreement } from './known.js';
import { checkGraph, classOf, inputValues, signature, type Disagreement } from './runner.js';
import { shrink, type Failure } from './shrinker.js';
import { onnxModel } from '../onnx/onnx-writer.js';

export interface CampaignOptions {
  count: number;
  seed: number;
  /** Shrink up to this many failures per signature (0: none). */
  shrinkPerSignature?: number;
  /** Write shrunk failures under regressions/. */
  save?: boolean;
  /** Check only the graph with this index (to reproduce one finding). */
  only?: number;
  log?: (line: string) => void;
}

export interface Finding {
  /** signature and operators of the shrunk graph (or of the whole graph when not shrunk). */
  key: string;
  known?: string;
  count: number;
  example: string;
  saved?: string;
}

export interface CampaignResult {
  graphs: number;
  invalid: number;
  seconds: number;
  compared: number;
  skipped: number;
  findings: Finding[];
  unknown: Finding[];
  /** Known entries that nothing in this run matched. */
  unmatchedKnown: string[];
}

export async function runCampaign(options: CampaignOptions): Promise<CampaignResult> {
  const log = options.log ?? (() => {});
  const known: KnownDisagreement[] = readKnown();
  const rng = new Rng(options.seed);
  const findings = new Map<string, Finding>();
  const shrunkPerSignature = new Map<string, number>();
  const matched = new Set<string>();
  const start = Date.now();
  let invalid = 0;
  let compared = 0;
  let skipped = 0;
  for (let i = 0; i < options.count; i++) {
    const recipe = randomRecipe(rng);
    const graph = buildGraph(recipe);
    if (options.only !== undefined && i !== options.only) continue;
    const feeds = inputValues(graph.inputs, recipe.valueSeed);
    const result = await checkGraph(graph, feeds);
    if (result.invalid !== undefined) {
      invalid++;
      log(`graph ${i} (${graph.ops.join(' -> ')}): onnxruntime refused it: ${result.invalid}`);
      continue;
    }
    compared += result.compared;
    skipped += result.skipped;
    // One finding per signature per graph: the first element that disagreed.
    const seen = new Set<string>();
    for (const d of result.disagreements) {
      const sig = signature(d);
      if (seen.has(sig)) continue;
      seen.add(sig);
      const entry = await matchKnown(known, d, { ops: graph.ops, feeds, model: onnxModel(graph.graph, OPSET), tolerance: graph.tolerance });
      if (entry !== undefined) matched.add(entry.id);
      let key = `${sig} in ${[...new Set(graph.ops)].sort().join(',')}`;
      let saved: string | undefined;
      let example = `seed ${options.seed} graph ${i} (${graph.ops.join(' -> ')}): ${d.detail}`;
      // Known and new disagreements of one signature are shrunk separately, so a known one cannot hide a new one.
      const budgetKey = `${sig} ${entry?.id ?? 'new'}`;
      const shrunkSoFar = shrunkPerSignature.get(budgetKey) ?? 0;
      if (shrunkSoFar < (options.shrinkPerSignature ?? 0)) {
        shrunkPerSignature.set(budgetKey, shrunkSoFar + 1);
        const small = await shrink({ recipe, graph, feeds, disagreement: d });
        key = `${sig} in ${[...new Set(small.graph.ops)].sort().join(',')}`;
        example = `seed ${options.seed} graph ${i}, shrunk to ${small.graph.ops.join(' -> ')}: ${small.disagreement.detail}`;
        if (options.save && !findings.has(key)) saved = save(small, entry, `seed ${options.seed} graph ${i}`);
      }
      const finding = findings.get(key) ?? { key, known: entry?.id, count: 0, example, saved };
      finding.count++;
      findings.set(key, finding);
      if (finding.count === 1) log(`${entry === undefined ? 'NEW' : `known (${entry.id})`}: ${example}`);
    }
    if ((i + 1) % 500 === 0) log(`${i + 1} graphs, ${((i + 1) / ((Date.now() - start) / 1000)).toFixed(1)} graphs/s`);
  }
  const all = [...findings.values()].sort((a, b) => b.count - a.count);
  return {
    graphs: options.count,
    invalid,
    seconds: (Date.now() - start) / 1000,
    compared,
    skipped,
    findings: all,
    unknown: all.filter((f) => f.known === undefined),
    unmatchedKnown: known.filter((k) => !matched.has(k.id)).map((k) => k.id),
  };
}

function save(failure: Failure, entry: KnownDisagreement | undefined, found: string): string {
  const d: Disagreement = failure.disagreement;
  const word = (v: number): string => ({ nan: 'nan', '+inf': 'posinf', '-inf': 'neginf', finite: 'finite' })[classOf(v)];
  const tag = `${d.path}-${d.kind}${d.kind === 'nonfinite' ? `-${word(d.expected!)}-to-${word(d.actual!)}` : ''}`;
  const name = `${tag}-${[...new Set(failure.graph.ops)].join('-')}-${found.replace(/\D+/g, '-').replace(/^-|-$/g, '')}`;
  return saveRegression(
    name,
    onnxModel(failure.graph.graph, OPSET),
    {
      ops: failure.graph.ops,
      inputs: failure.graph.inputs.map((i) => ({ name: i.name, shape: i.shape })),
      outputs: failure.graph.outputs,
      tolerance: failure.graph.tolerance,
      disagreement: d,
      known: entry?.id,
      found,
    },
    failure.feeds,
  );
}
