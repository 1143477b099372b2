export { EtnaError, type EtnaErrorCode } from './errors.js';
export { Program, type ProgramLoadOptions, type ProgramSource } from './program.js';
export {
  Module,
  type ArenaReport,
  type ExecuteOptions,
  type InputValue,
  type MemoryReport,
  type ModuleOptions,
  type ShareMemoryArenas,
  type TensorLike,
  type Value,
} from './module.js';
export { Tensor, elementSize, type DType, type TensorData } from './tensor.js';
export type {
  ExtendedHeaderDescription,
  MethodDescription,
  ProgramDescription,
  StateTensorDescription,
  ValueDescription,
} from './program-types.js';
