// Reads the flatbuffer graph out of an XnnpackBackend delegate payload
// (header: flatbuffer offset at byte 10, its size at byte 14).
import * as flatbuffers from 'flatbuffers';

import { Graph, type NodeUnion } from '../../lib/generated/xnnpack/xnnpack_generated.js';

export function payloadGraph(payload: Uint8Array): Graph {
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  const offset = view.getUint32(10, true);
  const size = view.getUint32(14, true);
  return Graph.getRootAsGraph(new flatbuffers.ByteBuffer(payload.slice(offset, offset + size)));
}

/** The node types of a payload's graph, in order. */
export function payloadNodeTypes(payload: Uint8Array): NodeUnion[] {
  const graph = payloadGraph(payload);
  return Array.from({ length: graph.nodesLength() }, (_, i) => graph.nodes(i)!.nodeType());
}
