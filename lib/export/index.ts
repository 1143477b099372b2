// Authoring API: build multi-method programs with shared buffers, plan their
// memory and write .pte files, without the native addon.
export { DTYPES, dtypeInfo, encodeTensorData, isDType, SCALAR_TYPE_BYTES } from './dtype.js';
export type { DType, DTypeInfo, DTypeKind, TensorInitData } from './dtype.js';
export { alignUp, checkShape, formatShape, MAX_RANK, normalizeDim, numel, sameShape } from './shape.js';
export type { Shape } from './shape.js';
export * from './shape-inference.js';
export { ConstantTensor, MethodGraph, ProgramGraph, SharedBuffer, TensorValue } from './graph.js';
export type { CompileSpec, GraphDelegate, GraphInstruction, GraphValue, NamedBlob, TensorNode, TensorOrigin } from './graph.js';
export { MethodBuilder } from './method-builder.js';
export type { Conv2dOptions, GeluApproximation, KernelArgument, TensorInput } from './method-builder.js';
export { ProgramBuilder } from './program-builder.js';
export type { ExportOptions, ExportResult } from './program-builder.js';
export { createLoweringContext, runLoweringPasses, validateMethodGraph } from './lowering.js';
export type { LoweringContext, LoweringPass } from './lowering.js';
export {
  ACTIVATION_MEMORY_ID,
  DEFAULT_PLANNING_ALIGNMENT,
  formatMemoryReport,
  lifetimesOverlap,
  memoryReport,
  planArena,
  planMethod,
  planProgram,
  planSharedBuffers,
  SHARED_MEMORY_ID,
  tensorLifetimes,
} from './planner.js';
export type {
  ArenaPlan,
  LifetimeItem,
  PlanMemoryReport,
  MemoryReportRow,
  MethodMemoryPlan,
  PlannerOptions,
  ProgramMemoryPlan,
  SharedBufferPlacement,
  TensorPlacement,
} from './planner.js';
export { assembleProgram } from './assemble.js';
export {
  DEFAULT_CONSTANT_ALIGNMENT,
  DEFAULT_SEGMENT_ALIGNMENT,
  EXTENDED_HEADER_LENGTH,
  EXTENDED_HEADER_MAGIC,
  PTE_FILE_IDENTIFIER,
  SCHEMA_FORCE_ALIGN,
  serializePte,
  validatePteProgram,
  writePte,
} from './writer.js';
export type {
  PteDelegate,
  PteInstruction,
  PteLayout,
  PteMethod,
  PteOperator,
  PteProgram,
  PteSegmentLayout,
  PteTensor,
  PteValue,
  PteWriteOptions,
  SegmentPurpose,
  SerializedPte,
} from './writer.js';
export * from './xnnpack/index.js';
