// A tied-weight autoencoder: two stateless methods reading the same weights.
//   encode(x float32[1,32]) -> code float32[1,8]
//   decode(code float32[1,8]) -> reconstruction float32[1,32]
// decode multiplies by the encoder matrices themselves (no transpose), so both
// methods reference the same constants.
import { ProgramBuilder } from '../../export/program-builder.js';
import {
  float32Tensor,
  linearRows,
  map,
  matmulRows,
  randomLinear,
  relu,
  SeededRandom,
  sigmoid,
  MethodTableReference,
  type ExampleCall,
  type LinearWeights,
  type ReferenceMethod,
} from './reference.js';

export const ENCODER_DECODER_CONFIG = {
  inputSize: 32,
  hiddenSize: 16,
  codeSize: 8,
  seed: 0x6564_6563,
} as const;

const C = ENCODER_DECODER_CONFIG;

export interface EncoderDecoderWeights {
  /** [hidden, input] */
  readonly encoder1: LinearWeights;
  /** [code, hidden] */
  readonly encoder2: LinearWeights;
  /** Decoder biases; the decoder's matrices are the encoder's. */
  readonly decoderBias1: Float32Array;
  readonly decoderBias2: Float32Array;
}

export function createEncoderDecoderWeights(seed: number = C.seed): EncoderDecoderWeights {
  const random = new SeededRandom(seed);
  return {
    encoder1: randomLinear(random, C.inputSize, C.hiddenSize),
    encoder2: randomLinear(random, C.hiddenSize, C.codeSize),
    decoderBias1: random.uniform(C.hiddenSize, 0.2),
    decoderBias2: random.uniform(C.inputSize, 0.2),
  };
}

export function buildEncoderDecoder(weights: EncoderDecoderWeights = createEncoderDecoderWeights()): ProgramBuilder {
  const program = new ProgramBuilder();
  const w1 = program.constant('encoder.layer1.weight', 'float32', [C.hiddenSize, C.inputSize], weights.encoder1.weight);
  const b1 = program.constant('encoder.layer1.bias', 'float32', [C.hiddenSize], weights.encoder1.bias);
  const w2 = program.constant('encoder.layer2.weight', 'float32', [C.codeSize, C.hiddenSize], weights.encoder2.weight);
  const b2 = program.constant('encoder.layer2.bias', 'float32', [C.codeSize], weights.encoder2.bias);
  const c1 = program.constant('decoder.layer1.bias', 'float32', [C.hiddenSize], weights.decoderBias1);
  const c2 = program.constant('decoder.layer2.bias', 'float32', [C.inputSize], weights.decoderBias2);

  program.method('encode', (m) => {
    const x = m.input('x', 'float32', [1, C.inputSize]);
    const hidden = m.relu(m.linear(x, w1, b1));
    m.output({ code: m.tanh(m.linear(hidden, w2, b2)) });
  });
  program.method('decode', (m) => {
    const code = m.input('code', 'float32', [1, C.codeSize]);
    const hidden = m.relu(m.add(m.matmul(code, w2), c1)); // [1,8] x [8,16]
    m.output({ reconstruction: m.sigmoid(m.add(m.matmul(hidden, w1), c2)) }); // [1,16] x [16,32]
  });
  return program;
}

export class EncoderDecoderReference extends MethodTableReference {
  readonly example = 'encoder-decoder';
  protected readonly signatures: Readonly<Record<string, ReferenceMethod>> = {
    encode: {
      inputs: [{ name: 'x', dtype: 'float32', shape: [1, C.inputSize] }],
      run: ([x]) => [float32Tensor([1, C.codeSize], this.encode(x!.data as Float32Array))],
    },
    decode: {
      inputs: [{ name: 'code', dtype: 'float32', shape: [1, C.codeSize] }],
      run: ([code]) => [float32Tensor([1, C.inputSize], this.decode(code!.data as Float32Array))],
    },
  };

  constructor(readonly weights: EncoderDecoderWeights = createEncoderDecoderWeights()) {
    super();
  }

  encode(x: Float32Array): Float32Array {
    const hidden = map(linearRows(x, 1, this.weights.encoder1), relu);
    return map(linearRows(hidden, 1, this.weights.encoder2), Math.tanh);
  }

  decode(code: Float32Array): Float32Array {
    const { encoder1, encoder2, decoderBias1, decoderBias2 } = this.weights;
    const hidden = matmulRows(code, 1, C.codeSize, encoder2.weight, C.hiddenSize);
    for (let i = 0; i < C.hiddenSize; i++) hidden[i] = relu(Math.fround(hidden[i]! + decoderBias1[i]!));
    const out = matmulRows(hidden, 1, C.hiddenSize, encoder1.weight, C.inputSize);
    for (let i = 0; i < C.inputSize; i++) out[i] = sigmoid(Math.fround(out[i]! + decoderBias2[i]!));
    return out;
  }

  session(): ExampleCall[] {
    return encoderDecoderSession();
  }
}

/** encode two inputs, decode both codes, decode a fixed code. */
export function encoderDecoderSession(seed = 13): ExampleCall[] {
  const random = new SeededRandom(seed);
  const reference = new EncoderDecoderReference();
  const inputs = [0, 1].map(() => random.uniform(C.inputSize, 1));
  const calls: ExampleCall[] = inputs.map((x) => ({ method: 'encode', inputs: [float32Tensor([1, C.inputSize], x)] }));
  for (const x of inputs) calls.push({ method: 'decode', inputs: [float32Tensor([1, C.codeSize], reference.encode(x))] });
  calls.push({ method: 'decode', inputs: [float32Tensor([1, C.codeSize], random.uniform(C.codeSize, 1))] });
  return calls;
}
