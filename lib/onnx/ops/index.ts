// ONNX op -> ExecuTorch portable kernels, with ONNX semantics (numpy
// broadcasting, attribute defaults per opset, explicit pads, LSTM/GRU gate
// orders). Every handler gets static shapes; values known at import time are
// folded instead of lowered wherever the result is needed as an argument.
// This table names the handler of each op; the handlers live with their
// family in the files beside it.
import { elu, hardSigmoid, hardSwish, leakyRelu, prelu, selu, softmaxHandler, softplus } from './activation.js';
import type { OpHandler } from './common.js';
import { conv, convTranspose } from './conv.js';
import { binaryArith, cast, clip, comparison, logicalNot, pow, reciprocal, sign, unaryKernel, variadic, whereOp } from './elementwise.js';
import { concat, gather, pad, sliceOp, split } from './indexing.js';
import { gemm, matmul } from './matmul.js';
import { batchNorm, instanceNorm, layerNorm } from './norm.js';
import { globalPool, pool } from './pool.js';
import { gru, lstm } from './recurrent.js';
import { argReduce, reduceHandler } from './reduce.js';
import { resize } from './resize.js';
import { constantOfShape, dropout, expand, flatten, passThrough, reshapeOp, shapeOp, size, squeeze, tile, transpose, unsqueeze } from './shape.js';

export const OP_HANDLERS: Readonly<Record<string, OpHandler>> = {
  Identity: passThrough,
  Dropout: dropout,
  Add: binaryArith('add'),
  Sub: binaryArith('sub'),
  Mul: binaryArith('mul'),
  Div: binaryArith('div'),
  Pow: pow,
  Relu: unaryKernel('aten::relu.out'),
  Sigmoid: unaryKernel('aten::sigmoid.out'),
  Tanh: unaryKernel('aten::tanh.out'),
  Exp: unaryKernel('aten::exp.out'),
  Log: unaryKernel('aten::log.out'),
  Sqrt: unaryKernel('aten::sqrt.out'),
  Neg: unaryKernel('aten::neg.out'),
  Abs: unaryKernel('aten::abs.out'),
  Sin: unaryKernel('aten::sin.out'),
  Cos: unaryKernel('aten::cos.out'),
  Floor: unaryKernel('aten::floor.out'),
  Ceil: unaryKernel('aten::ceil.out'),
  Round: unaryKernel('aten::round.out'),
  Erf: unaryKernel('aten::erf.out'),
  Not: logicalNot,
  Reciprocal: reciprocal,
  Softplus: softplus,
  Sign: sign,
  LeakyRelu: leakyRelu,
  Elu: elu,
  Selu: selu,
  HardSigmoid: hardSigmoid,
  HardSwish: hardSwish,
  PRelu: prelu,
  Equal: comparison('eq'),
  Greater: comparison('gt'),
  Less: comparison('lt'),
  GreaterOrEqual: comparison('ge'),
  LessOrEqual: comparison('le'),
  Where: whereOp,
  Max: variadic('max'),
  Min: variadic('min'),
  Sum: variadic('sum'),
  Mean: variadic('mean'),
  Conv: conv,
  ConvTranspose: convTranspose,
  Resize: resize,
  Upsample: resize,
  MaxPool: pool('max'),
  AveragePool: pool('average'),
  GlobalAveragePool: globalPool('mean'),
  GlobalMaxPool: globalPool('amax'),
  Pad: pad,
  Slice: sliceOp,
  Gather: gather,
  Concat: concat,
  Unsqueeze: unsqueeze,
  Squeeze: squeeze,
  Reshape: reshapeOp,
  Flatten: flatten,
  Transpose: transpose,
  Split: split,
  Cast: cast,
  Softmax: softmaxHandler(false),
  LogSoftmax: softmaxHandler(true),
  Gemm: gemm,
  MatMul: matmul,
  Clip: clip,
  ReduceMean: reduceHandler('mean', 18),
  ReduceSum: reduceHandler('sum', 13),
  ReduceMax: reduceHandler('amax', 18),
  ReduceMin: reduceHandler('amin', 18),
  ReduceSumSquare: reduceHandler('sumsquare', 18),
  ReduceL1: reduceHandler('l1', 18),
  ReduceL2: reduceHandler('l2', 18),
  ReduceLogSum: reduceHandler('logsum', 18),
  ReduceLogSumExp: reduceHandler('logsumexp', 18),
  ArgMax: argReduce('argmax'),
  ArgMin: argReduce('argmin'),
  BatchNormalization: batchNorm,
  InstanceNormalization: instanceNorm,
  LayerNormalization: layerNorm,
  Tile: tile,
  Expand: expand,
  ConstantOfShape: constantOfShape,
  Shape: shapeOp,
  Size: size,
  LSTM: lstm,
  GRU: gru,
};
