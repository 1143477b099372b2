export { EtnaError, type EtnaErrorCode } from './errors.js';
export { Program } from './program.js';
export type {
  ExtendedHeaderDescription,
  MethodDescription,
  ProgramDescription,
  ValueDescription,
} from './program-types.js';
