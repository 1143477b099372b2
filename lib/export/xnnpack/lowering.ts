// The XNNPACK lowering pass: every maximal run of consecutive instructions the
// delegate can execute becomes one XnnpackBackend payload and one
// DelegateCall (arguments: the run's inputs, then its outputs). Constants go
// to program named data under the SHA-256 of their bytes, so the same weight
// used by several delegates or methods is stored once and packed once.
//
// This file finds the runs and what folds together inside one (clamps into
// their producers, transposes into batch matmuls, dequantize/quantize pairs
// into 8-bit products); run-builder.ts holds a run's delegate graph,
// emitters.ts the nodes each op becomes, weights.ts the weight transforms.
import type { GraphInstruction, MethodGraph } from '../graph.js';
import type { LoweringContext, LoweringPass } from '../lowering.js';
import { NodeUnion } from '../../generated/xnnpack/xnnpack_generated.js';
import { fuseActivationPatterns } from './activation-patterns.js';
import { emitOp, emitQuantizedProduct, emitTransposedBatchMatmul, type QuantizedProduct } from './emitters.js';
import {
  isComputeOp,
  matchInstruction,
  operandsRead,
  type DequantizedConstant,
  type MatchedOp,
  type TensorQuantization,
} from './partition.js';
import { RunBuilder } from './run-builder.js';
import { scheduleForDelegateRuns } from './schedule.js';

export { XNNPACK_CONSTANT_ALIGNMENT } from './run-builder.js';
export { constantKey } from './weights.js';

export const XNNPACK_BACKEND_ID = 'XnnpackBackend';
/** XNNPACK may read up to 16 bytes past a tensor; planned arenas carry this much slack. */
export const XNNPACK_ARENA_PADDING = 64;

export interface XnnpackLoweringOptions {
  /** Runs with fewer compute nodes (linear, arithmetic, activations, softmax, conv, bmm) stay portable. Default 1. */
  minComputeNodes?: number;
}

const BINARY_WITHOUT_BOUNDS: ReadonlySet<NodeUnion> = new Set([
  NodeUnion.XNNBatchMatrixMultiply,
  NodeUnion.XNNMaximum,
  NodeUnion.XNNMinimum,
  NodeUnion.XNNPReLU,
]);
function takesBounds(op: MatchedOp): boolean {
  return (
    op.kind === 'fullyConnected' ||
    op.kind === 'conv2d' ||
    op.kind === 'convTranspose2d' ||
    (op.kind === 'binary' && !BINARY_WITHOUT_BOUNDS.has(op.code))
  );
}

function producedValue(op: MatchedOp): number {
  return op.out;
}

interface Run {
  readonly start: number;
  readonly end: number; // exclusive
}

/** Lowers one method in place; returns the number of delegate calls it created. */
export function lowerMethodToXnnpack(method: MethodGraph, context: LoweringContext, options: XnnpackLoweringOptions = {}): number {
  const minCompute = options.minComputeNodes ?? 1;
  method.arenaPaddingBytes = Math.max(method.arenaPaddingBytes, XNNPACK_ARENA_PADDING);

  const instructions = method.instructions;
  const weightTransposeOf = new Map<number, number>();
  const dequantizedConstantOf = new Map<number, DequantizedConstant>();
  const matches: (MatchedOp | undefined)[] = instructions.map((instruction) => {
    const op = matchInstruction(method, instruction, weightTransposeOf, dequantizedConstantOf);
    if (op?.kind === 'weightTranspose') weightTransposeOf.set(op.out, op.source);
    if (op?.kind === 'dequantizedConstant') dequantizedConstantOf.set(op.out, op);
    return op;
  });
  fuseActivationPatterns(method, matches);
  const quantizations = quantizationsOf(matches);
  scheduleForDelegateRuns(method, matches);

  // Who reads each value: matched instructions read their operands, others everything they name.
  const readers = new Map<number, number[]>();
  const addReader = (value: number, step: number): void => {
    const list = readers.get(value);
    if (list === undefined) readers.set(value, [step]);
    else list.push(step);
  };
  instructions.forEach((instruction, step) => {
    const op = matches[step];
    const reads = op === undefined ? method.instructionOperands(instruction) : operandsRead(op);
    for (const value of new Set(reads)) addReader(value, step);
  });
  const methodOutputs = new Set(method.outputs);
  // An op whose kernel writes an extra output the delegate does not produce stays portable when anything reads that output.
  matches.forEach((op, step) => {
    if (
      op?.kind === 'pool2d' &&
      op.unread !== undefined &&
      (methodOutputs.has(op.unread) || (readers.get(op.unread) ?? []).some((reader) => reader !== step))
    )
      matches[step] = undefined;
  });

  const runs: Run[] = [];
  for (let step = 0; step < instructions.length; ) {
    if (matches[step] === undefined) {
      step++;
      continue;
    }
    let end = step;
    while (end < instructions.length && matches[end] !== undefined) end++;
    const compute = matches.slice(step, end).filter((op) => isComputeOp(op!)).length;
    if (compute >= minCompute) runs.push({ start: step, end });
    step = end;
  }
  if (runs.length === 0) return 0;

  const rewritten: GraphInstruction[] = [];
  let cursor = 0;
  for (const run of runs) {
    rewritten.push(...instructions.slice(cursor, run.start));
    const inRun = (step: number): boolean => step >= run.start && step < run.end;
    const readOutside = (value: number): boolean => methodOutputs.has(value) || (readers.get(value) ?? []).some((step) => !inRun(step));

    // A clamp folds into the node producing its input when nothing else reads that value.
    const fused = new Map<number, { out: number; bounds: readonly [number, number] }>(); // producer step -> clamp
    const skipped = new Set<number>();
    const producerStep = new Map<number, number>();
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if (op.kind === 'clamp') {
        const producer = producerStep.get(op.input);
        const readersOfInput = readers.get(op.input) ?? [];
        if (
          producer !== undefined &&
          !fused.has(producer) &&
          takesBounds(matches[producer]!) &&
          readersOfInput.length === 1 &&
          !methodOutputs.has(op.input)
        ) {
          fused.set(producer, { out: op.out, bounds: [op.min, op.max] });
          skipped.add(step);
          producerStep.set(op.out, producer);
          continue;
        }
      }
      producerStep.set(producedValue(op), step);
    }

    // A transpose whose only reader is a bmm's second operand folds into it when that turns an element gather into row copies.
    const transposedB = new Map<number, number>(); // bmm step -> transpose step
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if (
        op.kind !== 'binary' ||
        op.code !== NodeUnion.XNNBatchMatrixMultiply ||
        !('value' in op.b) ||
        ('value' in op.a && op.a.value === op.b.value)
      )
        continue;
      const producer = producerStep.get(op.b.value);
      const transpose = producer === undefined ? undefined : matches[producer];
      if (transpose?.kind !== 'transpose' || skipped.has(producer!) || fused.has(producer!)) continue;
      const r = transpose.perm.length;
      const onlyReader = (readers.get(op.b.value) ?? []).length === 1 && !methodOutputs.has(op.b.value);
      if (onlyReader && r >= 3 && transpose.perm[r - 2] === r - 1) {
        transposedB.set(step, producer!);
        skipped.add(producer!);
      }
    }

    // A convolution or linear over dequantized codes whose input is dequantized in the run and whose
    // result (through a fused clamp) only a quantize reads computes on 8-bit codes.
    const quantizedProducts = new Map<number, QuantizedProduct>(); // product step -> its dequantize and quantize
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if ((op.kind !== 'conv2d' && op.kind !== 'fullyConnected') || skipped.has(step)) continue;
      const weight = dequantizedConstantOf.get(op.kind === 'conv2d' ? op.weight : op.filter);
      const source = weight === undefined ? undefined : method.tensorNode(weight.source);
      if (source?.dtype !== 'int8') continue;
      const dequantize = matches[producerStep.get(op.input) ?? -1];
      const result = fused.get(step)?.out ?? op.out;
      const resultReaders = readers.get(result) ?? [];
      const quantize = resultReaders.length === 1 ? matches[resultReaders[0]!] : undefined;
      if (dequantize?.kind !== 'dequantize' || quantize?.kind !== 'quantize' || !inRun(resultReaders[0]!) || methodOutputs.has(result))
        continue;
      if (op.bias !== undefined && method.tensorNode(dequantizedConstantOf.get(op.bias)?.source ?? op.bias).dtype !== 'int32') continue;
      quantizedProducts.set(step, { dequantize, quantize });
      skipped.add(resultReaders[0]!);
    }
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if (op.kind !== 'dequantize' || methodOutputs.has(op.out)) continue;
      const outReaders = readers.get(op.out) ?? [];
      if (outReaders.length > 0 && outReaders.every((reader) => quantizedProducts.has(reader))) skipped.add(step);
    }

    const runOutputs = new Set<number>();
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      if (op.kind === 'weightTranspose' || op.kind === 'dequantizedConstant' || op.kind === 'absorbed' || skipped.has(step)) continue;
      const plan = quantizedProducts.get(step);
      const produced = plan?.quantize.out ?? fused.get(step)?.out ?? op.out;
      if (readOutside(produced)) runOutputs.add(produced);
    }

    let currentStep = run.start;
    const builder = new RunBuilder(method, context, runOutputs, () => currentStep, quantizations, dequantizedConstantOf);
    for (let step = run.start; step < run.end; step++) {
      const op = matches[step]!;
      // Weight transposes and dequantized constants stay as kernel calls (ahead of the delegate) in case
      // something else reads them; unread ones are dropped below.
      if (op.kind === 'weightTranspose' || op.kind === 'dequantizedConstant') rewritten.push(instructions[step]!);
      if (skipped.has(step)) continue;
      currentStep = step;
      const plan = quantizedProducts.get(step);
      if (plan !== undefined) {
        emitQuantizedProduct(builder, op as Extract<MatchedOp, { kind: 'conv2d' | 'fullyConnected' }>, plan, fused.get(step)?.bounds);
        continue;
      }
      const folded = transposedB.get(step);
      if (folded !== undefined) {
        emitTransposedBatchMatmul(
          builder,
          op as Extract<MatchedOp, { kind: 'binary' }>,
          matches[folded] as Extract<MatchedOp, { kind: 'transpose' }>,
        );
        continue;
      }
      const clamp = fused.get(step);
      emitOp(builder, op, clamp?.out, clamp?.bounds);
    }
    const { payload, args } = builder.finish();
    const payloadIndex = context.addDelegatePayload(payload);
    method.delegates.push({ backendId: XNNPACK_BACKEND_ID, payload: payloadIndex, compileSpecs: [] });
    rewritten.push({ kind: 'delegate', delegate: method.delegates.length - 1, args });
    cursor = run.end;
  }
  rewritten.push(...instructions.slice(cursor));
  method.instructions.length = 0;
  method.instructions.push(...removeUnreadWeightTransposes(method, rewritten, weightTransposeOf, dequantizedConstantOf));
  releaseUnusedConstants(method);
  return runs.length;
}

/**
 * The quantization of every 8-bit value a matched quantize writes or a
 * matched dequantize reads. A dequantize reading a value with other
 * parameters than its quantize wrote stays portable.
 */
function quantizationsOf(matches: (MatchedOp | undefined)[]): Map<number, TensorQuantization> {
  const quantizations = new Map<number, TensorQuantization>();
  for (const op of matches) if (op?.kind === 'quantize') quantizations.set(op.out, op);
  matches.forEach((op, step) => {
    if (op?.kind !== 'dequantize') return;
    const known = quantizations.get(op.input);
    if (known === undefined) quantizations.set(op.input, op);
    else if (known.scale !== op.scale || known.zeroPoint !== op.zeroPoint || known.dtype !== op.dtype) matches[step] = undefined;
  });
  return quantizations;
}

function removeUnreadWeightTransposes(
  method: MethodGraph,
  list: GraphInstruction[],
  weightTransposeOf: ReadonlyMap<number, number>,
  dequantizedConstantOf: ReadonlyMap<number, DequantizedConstant>,
): GraphInstruction[] {
  const transposeOutput = (instruction: GraphInstruction): number | undefined => {
    if (instruction.kind !== 'kernel') return undefined;
    if (instruction.name === 'quantized_decomposed::dequantize_per_channel') {
      const out = instruction.args[instruction.args.length - 1];
      return out !== undefined && dequantizedConstantOf.has(out) ? out : undefined;
    }
    if (instruction.name !== 'aten::permute_copy') return undefined;
    const out = instruction.args[2];
    return out !== undefined && weightTransposeOf.has(out) ? out : undefined;
  };
  const read = new Set<number>(method.outputs);
  for (const instruction of list) {
    const own = transposeOutput(instruction);
    for (const operand of method.instructionOperands(instruction)) if (operand !== own) read.add(operand);
  }
  return list.filter((instruction) => {
    const own = transposeOutput(instruction);
    return own === undefined || read.has(own);
  });
}

// Constants only lowered nodes read now live in named data; dropping their
// values keeps them out of the constant segment (stored once, not twice).
function releaseUnusedConstants(method: MethodGraph): void {
  const referenced = new Set<number>([...method.inputs, ...method.outputs]);
  for (const instruction of method.instructions) for (const operand of method.instructionOperands(instruction)) referenced.add(operand);
  method.values.forEach((value, index) => {
    if (value.kind === 'tensor' && value.origin.kind === 'constant' && !referenced.has(index)) method.values[index] = { kind: 'null' };
    // A tensor list only a lowered instruction read goes too: it may name a constant released here.
    if ((value.kind === 'tensorList' || value.kind === 'optionalTensorList') && !referenced.has(index))
      method.values[index] = { kind: 'null' };
  });
}

/** The pass for ExportOptions.lowering (or `export({ xnnpack: true })`). */
export function xnnpackLowering(options: XnnpackLoweringOptions = {}): LoweringPass {
  return {
    name: 'xnnpack',
    run(method, context) {
      lowerMethodToXnnpack(method, context, options);
    },
  };
}
