// ONNX output of authored programs: one model per method, state as explicit inputs and outputs.
export {
  builderToOnnx,
  emitOnnxProgram,
  ONNX_IR_VERSION,
  ONNX_OPSET,
  stateInputName,
  stateOutputName,
} from './emitter.js';
export type { OnnxMethodModel, OnnxProgram, OnnxStateBinding, OnnxStateBuffer, OnnxTensorSignature } from './emitter.js';
export { OrtProgramRunner } from './ort-runner.js';
export type { OrtRunnerOptions } from './ort-runner.js';
