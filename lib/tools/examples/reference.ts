// Plain-TypeScript reference implementations share these types and float32
// helpers. Every op stores its result as float32 (accumulating in double inside
// an op), which is what a portable kernel computes up to summation order.
import { EtnaError } from '../../errors.js';
import type { DType } from '../../export/dtype.js';
import { formatShape, numel, sameShape } from '../../export/shape.js';
import { Xorshift32 } from '../../random.js';

export interface ReferenceTensor {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: Float32Array | BigInt64Array;
}

/** One call of a method: what a runtime test passes to `execute(method, inputs)`. */
export interface ExampleCall {
  readonly method: string;
  readonly inputs: readonly ReferenceTensor[];
}

export interface ExampleReference {
  readonly example: string;
  readonly methods: readonly string[];
  /** Runs one method on the reference state, exactly like the program's method of the same name. */
  execute(method: string, inputs: readonly ReferenceTensor[]): ReferenceTensor[];
  /**
   * A fixed sequence of calls exercising the state (including reset). Feed each
   * call to a fresh reference and to the runtime, in order, and compare outputs.
   */
  session(): ExampleCall[];
}

export function float32Tensor(shape: readonly number[], data: Float32Array | readonly number[]): ReferenceTensor {
  const values = data instanceof Float32Array ? data : Float32Array.from(data);
  if (values.length !== numel(shape))
    throw new EtnaError('INVALID_INPUT', `float32 tensor ${formatShape(shape)} needs ${numel(shape)} elements, got ${values.length}`);
  return { dtype: 'float32', shape: [...shape], data: values };
}

export function int64Tensor(shape: readonly number[], values: readonly (number | bigint)[]): ReferenceTensor {
  if (values.length !== numel(shape))
    throw new EtnaError('INVALID_INPUT', `int64 tensor ${formatShape(shape)} needs ${numel(shape)} elements, got ${values.length}`);
  return { dtype: 'int64', shape: [...shape], data: BigInt64Array.from(values, (v) => BigInt(v)) };
}

/** One input of a reference method's signature. */
export interface ReferenceInput {
  readonly name: string;
  readonly dtype: DType;
  readonly shape: readonly number[];
}

/** A reference method: its signature and what it computes once the inputs match it. */
export interface ReferenceMethod {
  readonly inputs: readonly ReferenceInput[];
  run(inputs: readonly ReferenceTensor[]): ReferenceTensor[];
}

/**
 * Checks `inputs` against the signature of `methods[method]`, naming the
 * method and input that do not match, then runs it.
 */
function runReferenceMethod(
  example: string,
  methods: Readonly<Record<string, ReferenceMethod>>,
  method: string,
  inputs: readonly ReferenceTensor[],
): ReferenceTensor[] {
  const entry = Object.hasOwn(methods, method) ? methods[method] : undefined;
  if (entry === undefined) {
    throw new EtnaError('METHOD_NOT_FOUND', `${example}: no method '${method}' (have ${Object.keys(methods).join(', ')})`);
  }
  if (inputs.length !== entry.inputs.length)
    throw new EtnaError('INVALID_INPUT', `${method}: expected ${entry.inputs.length} inputs, got ${inputs.length}`);
  entry.inputs.forEach(({ name, dtype, shape }, index) => {
    const tensor = inputs[index]!;
    if (tensor.dtype !== dtype || !sameShape(tensor.shape, shape)) {
      throw new EtnaError(
        'INVALID_INPUT',
        `${method}: input ${index} '${name}' must be ${dtype}${formatShape(shape)}, got ${tensor.dtype}${formatShape(tensor.shape)}`,
      );
    }
  });
  return entry.run(inputs);
}

/** A method without inputs or outputs that clears the reference's state. */
export function resetMethod(reset: () => void): ReferenceMethod {
  return {
    inputs: [],
    run: () => {
      reset();
      return [];
    },
  };
}

/**
 * A reference whose methods are a table of signatures: the method list and
 * `execute` (checks included) come from the table; subclasses compute.
 */
export abstract class MethodTableReference implements ExampleReference {
  abstract readonly example: string;
  protected abstract readonly signatures: Readonly<Record<string, ReferenceMethod>>;

  get methods(): readonly string[] {
    return Object.keys(this.signatures);
  }

  execute(method: string, inputs: readonly ReferenceTensor[]): ReferenceTensor[] {
    return runReferenceMethod(this.example, this.signatures, method, inputs);
  }

  abstract session(): ExampleCall[];
}

/** What a decoder example's methods are sized by. */
export interface DecoderShape {
  readonly prefillLength: number;
  /** Prefill takes 1 to prefillLength tokens instead of exactly prefillLength. */
  readonly prefillBounded?: boolean;
  readonly vocab: number;
  readonly context: number;
}

/**
 * A decoder with KV caches and the methods prefill(tokens int64[1,
 * prefillLength], start_pos int64[1]), decode(token int64[1, 1], pos int64[1])
 * and reset(). The signatures, the token and position checks and the reset
 * live here; a subclass computes one pass.
 */
export abstract class DecoderReference extends MethodTableReference {
  protected readonly signatures: Readonly<Record<string, ReferenceMethod>>;

  protected constructor(
    readonly example: string,
    private readonly shape: DecoderShape,
    protected readonly keyCaches: readonly Float32Array[],
    protected readonly valueCaches: readonly Float32Array[],
  ) {
    super();
    const { prefillLength, vocab } = shape;
    this.signatures = {
      prefill: {
        inputs: [
          { name: 'tokens', dtype: 'int64', shape: [1, prefillLength] },
          { name: 'start_pos', dtype: 'int64', shape: [1] },
        ],
        run: ([tokens, start]) => [
          float32Tensor([1, prefillLength, vocab], this.prefill(Array.from(tokens!.data as BigInt64Array, Number), Number(start!.data[0]))),
        ],
      },
      decode: {
        inputs: [
          { name: 'token', dtype: 'int64', shape: [1, 1] },
          { name: 'pos', dtype: 'int64', shape: [1] },
        ],
        run: ([token, pos]) => [float32Tensor([1, 1, vocab], this.decode(Number(token!.data[0]), Number(pos!.data[0])))],
      },
      reset: resetMethod(() => this.reset()),
    };
  }

  /** Logits [tokens x vocab] for a chunk of tokens at positions start.. */
  prefill(tokens: readonly number[], start: number): Float32Array {
    const { prefillLength, prefillBounded } = this.shape;
    if (prefillBounded === true ? tokens.length < 1 || tokens.length > prefillLength : tokens.length !== prefillLength) {
      throw new EtnaError(
        'INVALID_INPUT',
        `prefill: expected ${prefillBounded === true ? `1 to ${prefillLength}` : prefillLength} tokens, got ${tokens.length}`,
      );
    }
    return this.checkedPass(tokens, start, 'prefill');
  }

  /** Logits [vocab] for one token at `pos`. */
  decode(token: number, pos: number): Float32Array {
    return this.checkedPass([token], pos, 'decode');
  }

  reset(): void {
    for (const cache of [...this.keyCaches, ...this.valueCaches]) cache.fill(0);
  }

  /** Logits [rows x vocab] for `tokens` at positions start..start+rows-1; writes their keys and values into the caches. */
  protected abstract pass(tokens: readonly number[], start: number): Float32Array;

  private checkedPass(tokens: readonly number[], start: number, method: string): Float32Array {
    const { vocab, context } = this.shape;
    for (const token of tokens) {
      if (!Number.isInteger(token) || token < 0 || token >= vocab)
        throw new EtnaError('INVALID_INPUT', `${method}: token ${token} is outside the vocabulary 0..${vocab - 1}`);
    }
    tokens.forEach((_, t) => {
      const position = start + t;
      if (!Number.isInteger(position) || position < 0 || position >= context) {
        throw new EtnaError('INVALID_INPUT', `${method}: position ${position} is outside the context 0..${context - 1}`);
      }
    });
    return this.pass(tokens, start);
  }
}

// ------------------------------------------------------------------ deterministic weights

/** Draws for the examples' weights, over xorshift32, so every run builds the same weights. */
export class SeededRandom {
  private readonly words: Xorshift32;

  constructor(seed: number) {
    this.words = new Xorshift32(seed);
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.words.next();
  }

  /** `count` float32 values uniform in [-scale, scale). */
  uniform(count: number, scale: number): Float32Array {
    return this.words.signedFloat32(count, scale);
  }

  /** `count` float32 values uniform in [center - spread, center + spread). */
  around(count: number, center: number, spread: number): Float32Array {
    const out = this.uniform(count, spread);
    for (let i = 0; i < count; i++) out[i] = out[i]! + center;
    return out;
  }

  integer(limit: number): number {
    return Math.floor(this.next() * limit);
  }
}

/** Weights of a linear layer y = x W^T + b, W stored [out, in] row-major. */
export interface LinearWeights {
  readonly weight: Float32Array;
  readonly bias: Float32Array;
  readonly inFeatures: number;
  readonly outFeatures: number;
}

/** PyTorch-style init: uniform in +-1/sqrt(in_features). */
export function randomLinear(random: SeededRandom, inFeatures: number, outFeatures: number): LinearWeights {
  const bound = 1 / Math.sqrt(inFeatures);
  return { weight: random.uniform(outFeatures * inFeatures, bound), bias: random.uniform(outFeatures, bound), inFeatures, outFeatures };
}

export interface NormWeights {
  readonly weight: Float32Array;
  readonly bias: Float32Array;
}

export function randomNorm(random: SeededRandom, dim: number): NormWeights {
  return { weight: random.around(dim, 1, 0.1), bias: random.uniform(dim, 0.1) };
}

// ------------------------------------------------------------------ float32 math on row-major data

/** rows x in  ->  rows x out, y = x W^T + b. */
export function linearRows(x: Float32Array, rows: number, layer: LinearWeights): Float32Array {
  const { weight, bias, inFeatures, outFeatures } = layer;
  const out = new Float32Array(rows * outFeatures);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < outFeatures; o++) {
      let sum = 0;
      for (let i = 0; i < inFeatures; i++) sum += x[r * inFeatures + i]! * weight[o * inFeatures + i]!;
      out[r * outFeatures + o] = sum + bias[o]!;
    }
  }
  return out;
}

/** (rows x inner) times (inner x cols), no transpose. */
export function matmulRows(a: Float32Array, rows: number, inner: number, b: Float32Array, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      let sum = 0;
      for (let k = 0; k < inner; k++) sum += a[r * inner + k]! * b[k * cols + c]!;
      out[r * cols + c] = sum;
    }
  }
  return out;
}

export function layerNormRows(x: Float32Array, rows: number, dim: number, norm: NormWeights, eps: number): Float32Array {
  const out = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[r * dim + i]!;
    mean /= dim;
    let variance = 0;
    for (let i = 0; i < dim; i++) variance += (x[r * dim + i]! - mean) ** 2;
    variance /= dim;
    const rstd = 1 / Math.sqrt(variance + eps);
    for (let i = 0; i < dim; i++) out[r * dim + i] = (x[r * dim + i]! - mean) * rstd * norm.weight[i]! + norm.bias[i]!;
  }
  return out;
}

export function addInto(target: Float32Array, addend: Float32Array): void {
  for (let i = 0; i < target.length; i++) target[i] = target[i]! + addend[i]!;
}

export function map(x: Float32Array, f: (v: number) => number): Float32Array {
  const out = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = f(x[i]!);
  return out;
}

export function sigmoid(v: number): number {
  return 1 / (1 + Math.exp(-v));
}

export function relu(v: number): number {
  return v > 0 ? v : 0;
}

/** Softmax of `values[start .. start+length)` in place (max-subtracted). */
export function softmaxInPlace(values: Float32Array, start = 0, length = values.length - start): void {
  let max = -Infinity;
  for (let i = start; i < start + length; i++) max = Math.max(max, values[i]!);
  let sum = 0;
  for (let i = start; i < start + length; i++) {
    const e = Math.exp(values[i]! - max);
    values[i] = e;
    sum += e;
  }
  for (let i = start; i < start + length; i++) values[i] = values[i]! / sum;
}

// Series for small |x| and a continued fraction for erfc beyond, both to ~1e-15.
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let term = ax;
    let sum = ax;
    for (let n = 1; n < 80; n++) {
      term *= (-ax * ax) / n;
      const next = term / (2 * n + 1);
      sum += next;
      if (Math.abs(next) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  if (ax > 6) return Math.sign(x);
  // erfc(x) = exp(-x^2)/sqrt(pi) * 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
  let fraction = ax;
  for (let n = 60; n >= 1; n--) fraction = ax + n / 2 / fraction;
  const erfc = Math.exp(-ax * ax) / Math.sqrt(Math.PI) / fraction;
  return Math.sign(x) * (1 - erfc);
}

/** Exact GELU: x * Phi(x). */
export function gelu(v: number): number {
  return 0.5 * v * (1 + erf(v / Math.SQRT2));
}
