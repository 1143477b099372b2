// Activations that reach the lowering as several portable kernel calls (the
// ONNX importer writes PRelu, Elu and Selu as a compare, arithmetic and a
// where, which keep onnxruntime's edge cases) become one delegate node each
// when the node computes the same values, so the delegate is not split by
// kernels it has no node for.
import type { GraphInstruction, MethodGraph } from '../graph.js';
import type { MatchedOp } from './partition.js';

type Kernel = Extract<GraphInstruction, { kind: 'kernel' }>;

/** Smallest normal float32: XNNPACK refuses an ELU alpha below it. */
const MIN_NORMAL_FLOAT32 = 1.1754943508222875e-38;

class Patterns {
  private readonly producer = new Map<number, number>();
  private readonly readerCount = new Map<number, number>();

  constructor(
    private readonly method: MethodGraph,
    private readonly matches: (MatchedOp | undefined)[],
  ) {
    method.instructions.forEach((instruction, step) => {
      const operands = new Set(method.instructionOperands(instruction));
      if (instruction.kind === 'kernel') {
        const out = instruction.args[instruction.args.length - 1];
        if (out !== undefined) {
          this.producer.set(out, step);
          operands.delete(out);
        }
      }
      for (const value of operands) this.readerCount.set(value, (this.readerCount.get(value) ?? 0) + 1);
    });
    for (const value of method.outputs) this.readerCount.set(value, (this.readerCount.get(value) ?? 0) + 1);
  }

  private kernelAt(step: number | undefined, name: string): Kernel | undefined {
    if (step === undefined) return undefined;
    const instruction = this.method.instructions[step];
    return instruction?.kind === 'kernel' && `${instruction.name}.${instruction.overload}` === name ? instruction : undefined;
  }

  /** The step producing `value` with kernel `name`, when `value` has no other reader. */
  private soleUse(value: number, name: string): { step: number; args: readonly number[] } | undefined {
    const step = this.producer.get(value);
    const kernel = this.kernelAt(step, name);
    if (kernel === undefined || this.readerCount.get(value) !== 1) return undefined;
    return { step: step!, args: kernel.args };
  }

  private number(index: number | undefined): number | undefined {
    const value = index === undefined ? undefined : this.method.values[index];
    if (value?.kind === 'int') return Number(value.value);
    if (value?.kind === 'double') return value.value;
    return undefined;
  }

  private float32(index: number): boolean {
    const value = this.method.values[index];
    return value?.kind === 'tensor' && value.dtype === 'float32' && value.shape.length <= 6;
  }

  private sameShape(a: number, b: number): boolean {
    const x = this.method.tensorNode(a).shape;
    const y = this.method.tensorNode(b).shape;
    return x.length === y.length && x.every((d, i) => d === y[i]);
  }

  /** x compared with the number 0 by `kernel` (lt or gt), read only by the where. */
  private comparesWithZero(cond: number, kernel: string): { step: number; x: number } | undefined {
    const compare = this.soleUse(cond, kernel);
    if (compare === undefined || this.number(compare.args[1]) !== 0) return undefined;
    return { step: compare.step, x: compare.args[0]! };
  }

  /** alpha * (exp(x) - 1) as the importer writes it; the steps and alpha. */
  private exponentialBranch(value: number, x: number): { steps: number[]; alpha: number } | undefined {
    const scaled = this.soleUse(value, 'aten::mul.Scalar_out');
    const alpha = this.number(scaled?.args[1]);
    if (scaled === undefined || alpha === undefined) return undefined;
    const shifted = this.soleUse(scaled.args[0]!, 'aten::sub.Scalar_out');
    if (shifted === undefined || this.number(shifted.args[1]) !== 1 || this.number(shifted.args[2]) !== 1) return undefined;
    const exp = this.soleUse(shifted.args[0]!, 'aten::exp.out');
    if (exp === undefined || exp.args[0] !== x) return undefined;
    // XNNPACK takes a normal, positive, finite alpha only.
    if (!(alpha >= MIN_NORMAL_FLOAT32 && alpha <= 3.4028234663852886e38)) return undefined;
    return { steps: [exp.step, shifted.step, scaled.step], alpha };
  }

  /**
   * The slope of x * slope when the delegate's PReLU node takes it: a
   * float32 constant (or a number) that broadcasts to x's shape, any values.
   * Where XNNPACK's kernel would turn -0 into +0 (a negative, infinite or
   * NaN slope) or reads the slope other than one per element of the last dim,
   * the delegate runs its own, which keeps -0 as the where does.
   */
  private preluSlope(product: { args: readonly number[] }, x: number): { slope: Float32Array; slopeShape: number[] } | undefined {
    const operand = this.method.values[product.args[1]!];
    if (operand?.kind !== 'tensor') {
      const value = this.number(product.args[1]);
      return value === undefined ? undefined : { slope: Float32Array.of(value), slopeShape: [] };
    }
    if (operand.dtype !== 'float32' || operand.origin.kind !== 'constant') return undefined;
    const shape = this.method.tensorNode(x).shape;
    const offset = shape.length - operand.shape.length;
    if (offset < 0 || operand.shape.some((d, i) => d !== 1 && d !== shape[i + offset])) return undefined;
    return { slope: new Float32Array(operand.origin.constant.bytes.slice().buffer), slopeShape: [...operand.shape] };
  }

  /** The fused op a where at `step` ends, and the steps it absorbs. */
  private whereAt(step: number, args: readonly number[]): { op: MatchedOp; absorbed: number[] } | undefined {
    const [cond, ifTrue, ifFalse, out] = args as [number, number, number, number];
    if (!this.float32(ifTrue) || !this.float32(ifFalse) || !this.float32(out)) return undefined;
    const below = this.comparesWithZero(cond, 'aten::lt.Scalar_out');
    if (below !== undefined && below.x === ifFalse && this.sameShape(below.x, out)) {
      const x = below.x;
      // PRelu: where(x < 0, x * slope, x).
      const product = this.soleUse(ifTrue, 'aten::mul.out') ?? this.soleUse(ifTrue, 'aten::mul.Scalar_out');
      if (product !== undefined && product.args[0] === x) {
        const slope = this.preluSlope(product, x);
        if (slope !== undefined) return { op: { kind: 'prelu', ...slope, input: x, out }, absorbed: [below.step, product.step] };
      }
      // Elu: where(x < 0, alpha * (exp(x) - 1), x).
      const branch = this.exponentialBranch(ifTrue, x);
      if (branch !== undefined) {
        return { op: { kind: 'elu', alpha: branch.alpha, zeroToPositive: false, input: x, out }, absorbed: [below.step, ...branch.steps] };
      }
      return undefined;
    }
    // Selu before its scale: where(x > 0, x, alpha * (exp(x) - 1)); x = -0 takes the exponential branch, giving +0.
    const above = this.comparesWithZero(cond, 'aten::gt.Scalar_out');
    if (above !== undefined && above.x === ifTrue && this.sameShape(above.x, out)) {
      const branch = this.exponentialBranch(ifFalse, above.x);
      if (branch !== undefined) {
        return {
          op: { kind: 'elu', alpha: branch.alpha, zeroToPositive: true, input: above.x, out },
          absorbed: [above.step, ...branch.steps],
        };
      }
    }
    return undefined;
  }

  fuse(): void {
    this.method.instructions.forEach((instruction, step) => {
      const where = this.kernelAt(step, 'aten::where.self_out');
      if (where === undefined) return;
      const fused = this.whereAt(step, where.args);
      if (fused === undefined) return;
      // Everything from the first absorbed step to the where must land in one
      // delegate run, so the absorbed kernels never run without the fused node.
      const first = Math.min(...fused.absorbed);
      const absorbed = new Set(fused.absorbed);
      for (let t = first; t < step; t++) if (!absorbed.has(t) && this.matches[t] === undefined) return;
      for (const t of absorbed) {
        const out = (this.method.instructions[t] as Kernel).args.at(-1)!;
        this.matches[t] = { kind: 'absorbed', out };
      }
      this.matches[step] = fused.op;
    });
  }
}

/** Replaces matched instruction patterns in `matches` (one entry per instruction of `method`) with fused ops. */
export function fuseActivationPatterns(method: MethodGraph, matches: (MatchedOp | undefined)[]): void {
  new Patterns(method, matches).fuse();
}
