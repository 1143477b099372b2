/** What a method takes or returns. Tensor fields are present for tensors only. */
export interface ValueDescription {
  kind: 'tensor' | 'int' | 'double' | 'bool' | 'string' | 'none' | string;
  dtype?: string;
  shape?: number[];
  dynamism?: 'static' | 'bound' | 'unbound';
  /** Memory-planned (in an arena, or constant); unplanned inputs are used in place. */
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
  delegates: { id: string; location: 'inline' | 'segment'; bytes: number }[];
  methods: MethodDescription[];
}
