// Shape arithmetic shared by the runtime, authoring (export/shape.ts
// re-exports it) and the ONNX importer.

/** The number of elements of a tensor of `shape` (1 for a scalar). */
export function numel(shape: readonly number[]): number {
  let count = 1;
  for (const size of shape) count *= size;
  return count;
}
