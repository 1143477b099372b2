// Runs an emitted OnnxProgram on onnxruntime-node the way its users run
// several entry points: one InferenceSession per method, with the state held
// in JS and passed in and out of every call. The onnxruntime module is passed
// in, so nothing here loads it unless a caller does.
import type * as Ort from 'onnxruntime-node';

import { EtnaError } from '../../errors.js';
import type { DType } from '../../export/dtype.js';
import type { ReferenceTensor } from '../examples/reference.js';
import type { OnnxMethodModel, OnnxProgram, OnnxStateBuffer } from './emitter.js';

type OrtModule = typeof Ort;

function typedArrayFor(
  dtype: DType,
  bytes: Uint8Array | undefined,
  count: number,
): Float32Array | BigInt64Array | Int32Array | Float64Array {
  const copy = (n: number) => (bytes === undefined ? new ArrayBuffer(n) : bytes.slice().buffer);
  switch (dtype) {
    case 'float32':
      return new Float32Array(copy(count * 4));
    case 'float64':
      return new Float64Array(copy(count * 8));
    case 'int64':
      return new BigInt64Array(copy(count * 8));
    case 'int32':
      return new Int32Array(copy(count * 4));
    default:
      throw new EtnaError('INVALID_INPUT', `onnxruntime runner: state of dtype ${dtype} is not supported`);
  }
}

export interface OrtRunnerOptions {
  /** intraOpNumThreads of every session (default 1). */
  readonly threads?: number;
}

export class OrtProgramRunner {
  private readonly state = new Map<string, Ort.Tensor>();

  private constructor(
    private readonly ort: OrtModule,
    private readonly program: OnnxProgram,
    private readonly sessions: Map<string, { model: OnnxMethodModel; session: Ort.InferenceSession }>,
  ) {
    this.resetState();
  }

  static async create(ort: OrtModule, program: OnnxProgram, options: OrtRunnerOptions = {}): Promise<OrtProgramRunner> {
    const sessions = new Map<string, { model: OnnxMethodModel; session: Ort.InferenceSession }>();
    const threads = options.threads ?? 1;
    for (const model of program.methods) {
      const session = await ort.InferenceSession.create(model.bytes, {
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
      });
      // Keep the signatures only: the session holds the model now, and the caller may drop the bytes.
      sessions.set(model.method, { model: { ...model, bytes: new Uint8Array(0) }, session });
    }
    return new OrtProgramRunner(ort, { methods: [], state: program.state }, sessions);
  }

  get methodNames(): string[] {
    return [...this.sessions.keys()];
  }

  /** Puts every state buffer back to its initial value (what a freshly loaded program holds). */
  resetState(): void {
    for (const buffer of this.program.state) this.state.set(buffer.name, this.initialState(buffer));
  }

  private initialState(buffer: OnnxStateBuffer): Ort.Tensor {
    const count = buffer.shape.reduce((p, d) => p * d, 1);
    return new this.ort.Tensor(buffer.dtype as 'float32', typedArrayFor(buffer.dtype, buffer.init, count) as Float32Array, [
      ...buffer.shape,
    ]);
  }

  /** Runs one method with its own inputs; state goes in and comes back behind the scenes. */
  async execute(method: string, inputs: readonly ReferenceTensor[]): Promise<ReferenceTensor[]> {
    const entry = this.sessions.get(method);
    if (entry === undefined) throw new EtnaError('METHOD_NOT_FOUND', `no method '${method}' (have ${this.methodNames.join(', ')})`);
    const { model, session } = entry;
    if (inputs.length !== model.inputs.length)
      throw new EtnaError('INVALID_INPUT', `${method}: expected ${model.inputs.length} inputs, got ${inputs.length}`);
    const feeds: Record<string, Ort.Tensor> = {};
    model.inputs.forEach((signature, i) => {
      const input = inputs[i]!;
      feeds[signature.name] = new this.ort.Tensor(input.dtype as 'float32', input.data as Float32Array, [...input.shape]);
    });
    for (const binding of model.stateInputs) feeds[binding.name] = this.state.get(binding.buffer)!;
    const results = await session.run(feeds);
    for (const binding of model.stateOutputs) this.state.set(binding.buffer, results[binding.name]!);
    return model.outputs.map((signature) => {
      const tensor = results[signature.name]!;
      return { dtype: signature.dtype, shape: [...tensor.dims], data: tensor.data as Float32Array | BigInt64Array };
    });
  }

  async release(): Promise<void> {
    for (const { session } of this.sessions.values()) await session.release();
    this.sessions.clear();
  }
}
