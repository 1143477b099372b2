// ONNX import: turn an .onnx model into a multi-method .pte program.
export { importOnnx, importOnnxGraph, readOnnxModel, boundConstant, MIN_ONNX_OPSET } from './importer.js';
export type { DimRange, InputShape } from './bounded.js';
export type {
  BoundValue,
  ImportedOnnxGraph,
  ImportedTensorInfo,
  ImportOnnxOptions,
  ImportOnnxResult,
  OnnxContextWindow,
  OnnxStatePair,
} from './importer.js';
export { constFromProto, type ConstTensor, type ConstData } from './constant.js';
export { dtypeFromOnnx } from './dtype.js';
export { decodeModel, decodeTensor, type OnnxModel, type OnnxTensorProto } from './proto.js';
