export { EtnaError, type EtnaErrorCode } from './errors.js';
export { Program, type ProgramLoadOptions, type ProgramSource } from './program.js';
export {
  summarizeProfile,
  toChromeTrace,
  type ChromeTraceEvent,
  type ProfileCategory,
  type ProfileEvent,
  type ProfileSummaryRow,
} from './profile.js';
export type { ArenaReport, MemoryReport, ShareMemoryArenas } from './memory.js';
export {
  MAX_NUM_THREADS,
  Module,
  type CopyStateOptions,
  type ExecuteOptions,
  type Feeds,
  type InputValue,
  type ModuleOptions,
  type NamedValues,
  type RunOptions,
  type SaveStateOptions,
  type TensorLike,
  type ThreadPoolKind,
  type Value,
} from './module.js';
export {
  Tensor,
  elementSize,
  toTensor,
  type DType,
  type ElementValue,
  type OnnxruntimeTensorLike,
  type TensorData,
  type TensorDataTypes,
  type TensorFields,
  type TensorSource,
} from './tensor.js';
export type {
  ExtendedHeaderDescription,
  MethodDescription,
  ProgramDescription,
  StateTensorDescription,
  ValueDescription,
} from './program-types.js';
