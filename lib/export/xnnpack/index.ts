// Lowering of method graphs to XnnpackBackend delegate calls.
export {
  constantKey,
  lowerMethodToXnnpack,
  XNNPACK_ARENA_PADDING,
  XNNPACK_BACKEND_ID,
  XNNPACK_CONSTANT_ALIGNMENT,
  xnnpackLowering,
} from './lowering.js';
export type { XnnpackLoweringOptions } from './lowering.js';
export { buildXnnFlatbuffer, INVALID_VALUE_ID, serializeXnnPayload } from './payload.js';
export type { ConvolutionGeometry, XnnGraphSpec, XnnNodeBody, XnnNodeSpec, XnnValueSpec } from './payload.js';
