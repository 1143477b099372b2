// Shrinks a failing graph while it still fails the same way (the same
// disagreement signature): steps dropped, side outputs dropped, the first
// input's shape made smaller, then input values made simpler.
import { buildGraph, Unbuildable, type BuiltGraph, type Recipe } from './generator.js';
import { checkGraph, inputValues, signature, type Disagreement, type EnginePath, type Feeds } from './runner.js';

export interface Failure {
  recipe: Recipe;
  graph: BuiltGraph;
  feeds: Feeds;
  disagreement: Disagreement;
}

/** The first disagreement with this signature when `graph` runs on `feeds`, if it still has one. */
async function failsAs(graph: BuiltGraph, feeds: Feeds, wanted: string, path: EnginePath): Promise<Disagreement | undefined> {
  const result = await checkGraph(graph, feeds, [path]);
  return result.disagreements.find((d) => signature(d) === wanted);
}

function smallerShapes(shape: readonly number[]): number[][] {
  const out: number[][] = [];
  if (shape.length > 1) out.push(shape.slice(1));
  shape.forEach((d, i) => {
    for (const smaller of [1, Math.floor(d / 2), d - 1]) {
      if (smaller >= 1 && smaller < d) out.push(shape.map((v, j) => (j === i ? smaller : v)));
    }
  });
  return out.filter((s, i) => out.findIndex((t) => t.join() === s.join()) === i);
}

function structuralCandidates(recipe: Recipe): Recipe[] {
  const out: Recipe[] = [];
  for (let i = recipe.steps.length - 1; i >= 0; i--) {
    if (recipe.steps.length === 1) break;
    const steps = recipe.steps.filter((_, j) => j !== i);
    const extraOutputs = recipe.extraOutputs.filter((j) => j !== i && j < steps.length - 1).map((j) => (j > i ? j - 1 : j));
    out.push({ ...recipe, steps, extraOutputs });
  }
  if (recipe.extraOutputs.length > 0) out.push({ ...recipe, extraOutputs: [] });
  for (const inputShape of smallerShapes(recipe.inputShape)) out.push({ ...recipe, inputShape });
  return out;
}

const SIMPLE = [0, 1, -1, 0.5, 2];

/**
 * Shrinks `failure` and returns the smallest graph and inputs found that
 * still fail with the same signature. `budget` caps the engine runs.
 */
export async function shrink(failure: Failure, budget = 400): Promise<Failure> {
  const wanted = signature(failure.disagreement);
  const path = failure.disagreement.path;
  let best = failure;
  let runs = 0;
  // Structure first, with values regenerated from the recipe's seed.
  let progress = true;
  while (progress && runs < budget) {
    progress = false;
    for (const candidate of structuralCandidates(best.recipe)) {
      if (runs >= budget) break;
      let graph: BuiltGraph;
      try {
        graph = buildGraph(candidate);
      } catch (error) {
        if (error instanceof Unbuildable) continue;
        throw error;
      }
      const feeds = inputValues(graph.inputs, candidate.valueSeed);
      runs++;
      const d = await failsAs(graph, feeds, wanted, path);
      if (d !== undefined) {
        best = { recipe: candidate, graph, feeds, disagreement: d };
        progress = true;
        break;
      }
    }
  }
  // Then values: each element made simple where it does not matter.
  const feeds: Feeds = Object.fromEntries(Object.entries(best.feeds).map(([k, v]) => [k, Float32Array.from(v)]));
  for (const [name, values] of Object.entries(feeds)) {
    for (let i = 0; i < values.length && runs < budget; i++) {
      const original = values[i]!;
      for (const simple of SIMPLE) {
        if (Object.is(simple, original)) break;
        values[i] = simple;
        runs++;
        const d = await failsAs(best.graph, feeds, wanted, path);
        if (d !== undefined) {
          best = { ...best, feeds: { ...feeds, [name]: Float32Array.from(values) }, disagreement: d };
          break;
        }
        values[i] = original;
        if (runs >= budget) break;
      }
    }
  }
  return { ...best, feeds: Object.fromEntries(Object.entries(best.feeds).map(([k, v]) => [k, Float32Array.from(v)])) };
}
