/** What a method takes or returns. Tensor fields are present for tensors only. */
export interface ValueDescription {
  /**
   * Unique within the method's inputs (or outputs): from the program's pytree
   * spec (dict keys, as etna's authoring and ONNX import write them), else
   * `input_<i>` / `output_<i>`.
   */
  name: string;
  kind: 'tensor' | 'int' | 'double' | 'bool' | 'string' | 'none' | string;
  dtype?: string;
  shape?: number[];
  dynamism?: 'static' | 'bound' | 'unbound';
  /** Memory-planned (in an arena, or constant); a call copies unplanned inputs into buffers the method owns. */
  planned?: boolean;
  /** Bytes at the stored (upper-bound) shape. */
  nbytes?: number;
  memoryId?: number;
  memoryOffset?: number;
}

export interface MethodDescription {
  name: string;
  inputs: ValueDescription[];
  outputs: ValueDescription[];
  /** `name.overload` keys in first-use order. */
  operators: string[];
  /** Backend ids of the method's delegates. */
  delegates: string[];
  /** Instruction kind -> count. */
  instructions: Record<string, number>;
  /** `non_const_buffer_sizes` as stored (index 0 included). */
  memoryPlan: number[];
  /** Bytes of distinct constants the method reads. */
  constantBytes: number;
  /** Tensors in the state arena (mem_id 2), by offset. */
  state: StateTensorDescription[];
}

/** A tensor placed in the state arena (mem_id 2), shared across methods when sharing is on. */
export interface StateTensorDescription {
  /** Index in the method's values table. */
  value: number;
  dtype: string;
  shape: number[];
  /** Byte offset in the mem_id 2 arena. */
  offset: number;
  bytes: number;
  /** Fully qualified name, when the exporter wrote one. */
  name?: string;
}

export interface ExtendedHeaderDescription {
  headerLength: number;
  programSize: number;
  segmentBaseOffset: number;
  segmentDataSize?: number;
}

export interface ProgramDescription {
  identifier: 'ET12';
  extendedHeader: ExtendedHeaderDescription | null;
  segments: number;
  namedDataKeys: number;
  /** Constant tensors stored in the file (each stored once) and the bytes they occupy. */
  constants: { count: number; bytes: number };
  delegates: { id: string; location: 'inline' | 'segment'; bytes: number }[];
  methods: MethodDescription[];
}
