// Random ONNX graphs for the differential tester. A graph is a recipe: the
// shape of its first input and a chain of steps, each an operator with its
// own seed. Building a recipe runs every step's builder on the shape the
// previous step produced, so the same recipe always gives the same graph, and
// a shrunk recipe (a step dropped, a smaller first shape) rebuilds into a
// valid graph or is refused with `Unbuildable`.
import { GraphBuilder, Rng, size, Unbuildable, type BuiltGraph, type Recipe, type Step, type Value } from './graph.js';
import { OPS } from './ops.js';

export { OPSET, Rng, Unbuildable, type BuiltGraph, type Recipe, type RuntimeInput, type Tolerance } from './graph.js';

const OP_BY_NAME = new Map(OPS.map((op) => [op.name, op]));

const MAX_ELEMENTS = 4096;

/** Builds a recipe into an ONNX graph; throws Unbuildable when a step cannot follow the shape before it. */
export function buildGraph(recipe: Recipe): BuiltGraph {
  const b = new GraphBuilder();
  let x = b.input(recipe.inputShape);
  const outputs: Value[] = [];
  let rtol = 0;
  let atol = 0;
  recipe.steps.forEach((step, i) => {
    const spec = OP_BY_NAME.get(step.op);
    if (spec === undefined) throw new Unbuildable(`unknown op ${step.op}`);
    if (!spec.accepts(x.shape)) throw new Unbuildable(`${step.op} does not take [${x.shape}]`);
    x = spec.build(b, new Rng(step.seed), x);
    if (size(x.shape) > MAX_ELEMENTS || x.shape.length > 6 || x.shape.length === 0) throw new Unbuildable(`[${x.shape}] is out of range`);
    rtol += spec.tolerance.rtol;
    atol += spec.tolerance.atol;
    if (i === recipe.steps.length - 1 || recipe.extraOutputs.includes(i)) outputs.push(x);
  });
  if (recipe.steps.length === 0) throw new Unbuildable('no steps');
  for (const input of b.runtime) if (size(input.shape) > MAX_ELEMENTS) throw new Unbuildable('input too large');
  const all = [...outputs, ...b.sideOutputs];
  return {
    graph: {
      nodes: b.nodes,
      inputs: b.inputs,
      outputs: all.map((o) => ({ name: o.name, type: 1, shape: o.shape })),
      initializers: b.initializers,
    },
    inputs: b.runtime,
    outputs: all.map((o) => o.name),
    ops: recipe.steps.map((s) => s.op),
    tolerance: { rtol: Math.max(rtol, 1e-6), atol },
  };
}

function randomShape(rng: Rng): number[] {
  const rank = rng.pick([1, 2, 2, 3, 3, 4, 4]);
  return Array.from({ length: rank }, () => (rng.chance(0.2) ? 1 : rng.int(1, 6)));
}

/** A random recipe that builds: up to `maxSteps` operators chained on one input. */
export function randomRecipe(rng: Rng, maxSteps = 4): Recipe {
  for (;;) {
    const steps: Step[] = [];
    const inputShape = randomShape(rng);
    const count = rng.int(1, maxSteps);
    const recipe: Recipe = { inputShape, steps, valueSeed: rng.seed(), extraOutputs: [] };
    for (let i = 0; i < count; i++) {
      // Up to a few tries for an op that takes the current shape.
      for (let attempt = 0; attempt < 8; attempt++) {
        const candidate = { op: rng.pick(OPS).name, seed: rng.seed() };
        try {
          buildGraph({ ...recipe, steps: [...steps, candidate] });
          steps.push(candidate);
          break;
        } catch (error) {
          if (!(error instanceof Unbuildable)) throw error;
        }
      }
    }
    if (steps.length === 0) continue;
    for (let i = 0; i < steps.length - 1; i++) if (rng.chance(0.15)) recipe.extraOutputs.push(i);
    return recipe;
  }
}
