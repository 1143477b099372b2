// The seam for backend lowering: passes rewrite each method graph before memory
// planning, e.g. replacing a run of kernel calls by one DelegateCall whose
// payload and weights they register here.
import { EtnaError } from '../errors.js';
import type { MethodGraph, ProgramGraph } from './graph.js';

export interface LoweringContext {
  readonly program: ProgramGraph;
  /** Stores a delegate payload once per distinct content; returns its index for GraphDelegate.payload. */
  addDelegatePayload(bytes: Uint8Array): number;
  /** Stores a named blob (e.g. packed weights) once; the same key must always carry the same bytes. */
  addNamedData(key: string, data: Uint8Array, alignment?: number): void;
}

export interface LoweringPass {
  readonly name: string;
  run(method: MethodGraph, context: LoweringContext): void;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

function isPowerOfTwo(value: number): boolean {
  return Number.isInteger(value) && value > 0 && (value & (value - 1)) === 0;
}

export function createLoweringContext(program: ProgramGraph): LoweringContext {
  return {
    program,
    addDelegatePayload(bytes) {
      const existing = program.delegatePayloads.findIndex((p) => sameBytes(p, bytes));
      if (existing >= 0) return existing;
      program.delegatePayloads.push(bytes.slice());
      return program.delegatePayloads.length - 1;
    },
    addNamedData(key, data, alignment = 16) {
      if (typeof key !== 'string' || key.length === 0) throw new EtnaError('INVALID_INPUT', 'named data needs a non-empty key');
      if (!isPowerOfTwo(alignment))
        throw new EtnaError('INVALID_INPUT', `named data '${key}': alignment ${alignment} is not a power of two`);
      const existing = program.namedData.find((blob) => blob.key === key);
      if (existing !== undefined) {
        if (!sameBytes(existing.data, data))
          throw new EtnaError('INVALID_INPUT', `named data key '${key}' was already stored with different bytes`);
        return;
      }
      program.namedData.push({ key, data: data.slice(), alignment });
    },
  };
}

/** Checks the invariants the planner and writer rely on; names the pass that broke them. */
export function validateMethodGraph(method: MethodGraph, after: string): void {
  const fail = (message: string): never => {
    throw new EtnaError('INVALID_PROGRAM', `method '${method.name}' after ${after}: ${message}`);
  };
  const count = method.values.length;
  const inRange = (index: number): boolean => Number.isInteger(index) && index >= 0 && index < count;
  method.values.forEach((value, i) => {
    if (value.kind === 'intList') {
      for (const item of value.items)
        if (!inRange(item) || method.values[item]!.kind !== 'int') fail(`IntList v${i} item ${item} is not an Int value`);
    } else if (value.kind === 'tensorList') {
      for (const item of value.items)
        if (!inRange(item) || method.values[item]!.kind !== 'tensor') fail(`TensorList v${i} item ${item} is not a Tensor value`);
    } else if (value.kind === 'optionalTensorList') {
      for (const item of value.items) {
        if (item === -1) continue;
        const kind = inRange(item) ? method.values[item]!.kind : undefined;
        if (kind !== 'tensor' && kind !== 'null') fail(`OptionalTensorList v${i} item ${item} is not a Tensor or Null value`);
      }
    }
  });
  for (const [label, list] of [
    ['input', method.inputs],
    ['output', method.outputs],
  ] as const) {
    for (const index of list) if (!inRange(index)) fail(`${label} ${index} is not a value index`);
  }
  method.instructions.forEach((instruction, i) => {
    for (const arg of instruction.args) if (!inRange(arg)) fail(`instruction ${i} argument ${arg} is not a value index`);
    if (instruction.kind === 'delegate' && (instruction.delegate < 0 || instruction.delegate >= method.delegates.length)) {
      fail(`instruction ${i} names delegate ${instruction.delegate}, but the method has ${method.delegates.length}`);
    }
  });
}

export function runLoweringPasses(program: ProgramGraph, passes: readonly LoweringPass[]): void {
  const context = createLoweringContext(program);
  for (const pass of passes) {
    for (const method of program.methods) {
      pass.run(method, context);
      validateMethodGraph(method, `lowering pass '${pass.name}'`);
      for (const delegate of method.delegates) {
        if (delegate.payload < 0 || delegate.payload >= program.delegatePayloads.length) {
          throw new EtnaError(
            'INVALID_PROGRAM',
            `method '${method.name}' after lowering pass '${pass.name}': delegate '${delegate.backendId}' names payload ${delegate.payload}, but ${program.delegatePayloads.length} are stored`,
          );
        }
      }
    }
  }
}
