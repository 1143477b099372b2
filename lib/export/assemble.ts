// Turns planned method graphs into the wire-level program the writer
// serializes: numbers the constants and initial values program-wide, attaches
// allocation info, and builds each method's operator table.
import { EtnaError } from '../errors.js';
import { dtypeInfo } from './dtype.js';
import { isBounded, type ConstantTensor, type GraphValue, type ProgramGraph, type SharedBuffer } from './graph.js';
import { TensorShapeDynamism } from '../generated/program/program_generated.js';
import type { ProgramMemoryPlan } from './planner.js';
import type { PteInstruction, PteMethod, PteOperator, PteProgram, PteValue } from './writer.js';

function bytesKey(bytes: Uint8Array): string {
  // Cheap content key; equal keys are confirmed byte by byte.
  let hash = 2166136261;
  for (let i = 0; i < bytes.byteLength; i++) hash = Math.imul(hash ^ bytes[i]!, 16777619);
  return `${bytes.byteLength}:${(hash >>> 0).toString(16)}`;
}

/** Whether two byte arrays hold the same bytes. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Assigns indices (from 1; 0 is the reserved placeholder) to blobs, storing identical bytes once. */
class BlobTable {
  readonly blobs: Uint8Array[] = [];
  private readonly byKey = new Map<string, number[]>();

  add(bytes: Uint8Array): number {
    const key = bytesKey(bytes);
    const candidates = this.byKey.get(key) ?? [];
    for (const index of candidates) if (sameBytes(this.blobs[index - 1]!, bytes)) return index;
    this.blobs.push(bytes);
    candidates.push(this.blobs.length);
    this.byKey.set(key, candidates);
    return this.blobs.length;
  }
}

function usedProgramTensors(program: ProgramGraph): { constants: Set<ConstantTensor>; shared: Set<SharedBuffer> } {
  const constants = new Set<ConstantTensor>();
  const shared = new Set<SharedBuffer>();
  for (const method of program.methods) {
    for (const value of method.values) {
      if (value.kind !== 'tensor') continue;
      if (value.origin.kind === 'constant') constants.add(value.origin.constant);
      if (value.origin.kind === 'shared') shared.add(value.origin.buffer);
    }
  }
  return { constants, shared };
}

export function assembleProgram(program: ProgramGraph, plan: ProgramMemoryPlan): PteProgram {
  const used = usedProgramTensors(program);
  // Declaration order, so indices do not depend on which method used a weight first.
  const constantTable = new BlobTable();
  const constantIndex = new Map<ConstantTensor, number>();
  for (const constant of program.constants) {
    if (used.constants.has(constant)) constantIndex.set(constant, constantTable.add(constant.bytes));
  }
  const initTable = new BlobTable();
  const initIndex = new Map<SharedBuffer, number>();
  for (const buffer of program.sharedBuffers) {
    if (buffer.init !== undefined && used.shared.has(buffer)) initIndex.set(buffer, initTable.add(buffer.init));
  }

  const methods = program.methods.map((method, m): PteMethod => {
    const methodPlan = plan.methods[m];
    if (methodPlan === undefined || methodPlan.method !== method.name) {
      throw new EtnaError('INTERNAL', `memory plan does not match method '${method.name}'`);
    }
    const placement = new Map(methodPlan.placements.map((p) => [p.value, p]));
    const values = method.values.map((value, index): PteValue => {
      if (value.kind !== 'tensor') return scalarValue(value);
      const sizes = [...value.shape];
      const base = {
        kind: 'tensor' as const,
        scalarType: dtypeInfo(value.dtype).scalarType,
        sizes,
        dimOrder: sizes.map((_, i) => i),
        ...(isBounded(value) ? { shapeDynamism: TensorShapeDynamism.DYNAMIC_BOUND } : {}),
      };
      const origin = value.origin;
      if (origin.kind === 'constant') return { ...base, dataBufferIdx: constantIndex.get(origin.constant)! };
      const where = placement.get(index);
      if (where === undefined) {
        // Only activations that no instruction or output references are left unplanned.
        if (origin.kind === 'activation') return base;
        throw new EtnaError('INTERNAL', `method '${method.name}': tensor v${index} has no planned placement`);
      }
      const allocation = { memoryId: where.memoryId, offset: where.offset };
      if (origin.kind === 'shared') {
        const init = initIndex.get(origin.buffer);
        return { ...base, allocation, fullyQualifiedName: origin.buffer.name, ...(init === undefined ? {} : { dataBufferIdx: init }) };
      }
      return { ...base, allocation };
    });
    const operators: PteOperator[] = [];
    const operatorIndex = new Map<string, number>();
    const instructions = method.instructions.map((instruction): PteInstruction => {
      if (instruction.kind === 'delegate') return { kind: 'delegate', delegateIndex: instruction.delegate, args: instruction.args };
      const key = `${instruction.name}.${instruction.overload}`;
      let opIndex = operatorIndex.get(key);
      if (opIndex === undefined) {
        opIndex = operators.length;
        operators.push({ name: instruction.name, overload: instruction.overload });
        operatorIndex.set(key, opIndex);
      }
      return { kind: 'kernel', opIndex, args: instruction.args };
    });
    return {
      name: method.name,
      values,
      inputs: [...method.inputs],
      outputs: [...method.outputs],
      instructions,
      operators,
      delegates: method.delegates.map((d) => ({ backendId: d.backendId, payload: d.payload, compileSpecs: d.compileSpecs })),
      nonConstBufferSizes: methodPlan.nonConstBufferSizes,
      inputNames: method.inputs.map((index, i) => method.tensorNode(index).label ?? `input_${i}`),
      outputNames: method.outputs.map((_, i) => method.outputNames[i] ?? `output_${i}`),
    };
  });

  return {
    methods,
    constants: constantTable.blobs,
    mutableData: initTable.blobs,
    delegatePayloads: program.delegatePayloads,
    namedData: program.namedData,
  };
}

function scalarValue(value: Exclude<GraphValue, { kind: 'tensor' }>): PteValue {
  switch (value.kind) {
    case 'null':
      return { kind: 'null' };
    case 'int':
      return { kind: 'int', value: value.value };
    case 'double':
      return { kind: 'double', value: value.value };
    case 'bool':
      return { kind: 'bool', value: value.value };
    case 'string':
      return { kind: 'string', value: value.value };
    case 'intList':
    case 'doubleList':
    case 'boolList':
    case 'tensorList':
    case 'optionalTensorList':
      return value;
  }
}
