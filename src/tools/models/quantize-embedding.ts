/**
 * The tied embedding in a q4 pack: the token lookup `Gather(embedding, input_ids)` becomes com.microsoft
 * `GatherBlockQuantized` on the very 4-bit blocks the LM head's MatMulNBits reads, so the float32 table
 * leaves the file and memory. MatMulNBits stores a `[vocab, hidden]` weight as `[vocab, blocks, block/2]`
 * bytes, low nibble first with an implicit zero point of 8: with uint8 data GatherBlockQuantized follows
 * the same conventions, quantized along the last axis in one block per row of that axis.
 *
 * @example
 * const replaced = quantizeTiedEmbedding(graph, quantizedWeights, initializers, 32);
 */
import { create } from '@bufbuild/protobuf';
import { AttributeProtoSchema, AttributeProto_AttributeType, NodeProtoSchema, TensorProtoSchema, type GraphProto, type TensorProto } from 'onnx-buf';
import { DataType } from '../../shared/model/onnx-graph.ts';

const MS_DOMAIN = 'com.microsoft';

/** A weight quantized for MatMulNBits: `[packed [n, blocks, block/2], scales [n, blocks]]` of a `[n, k]` matrix. */
export interface NbitsWeight {
  k: number;
  n: number;
  tensors: TensorProto[];
}

const intAttr = (name: string, value: number) => create(AttributeProtoSchema, { name, type: AttributeProto_AttributeType.INT, i: BigInt(value) });

/**
 * Rewrites every `Gather(table, ids)` whose table was quantized n-major (the Gemm(transB=1) head on a
 * tied embedding, `quantized` keyed by the table's name) when the hidden size is a whole number of
 * blocks; returns how many were rewritten.
 */
export function quantizeTiedEmbedding(
  graph: GraphProto,
  quantized: ReadonlyMap<string, NbitsWeight>,
  initializers: Map<string, TensorProto>,
  blockSize: number,
): number {
  let count = 0;
  graph.node = graph.node.flatMap((node) => {
    const q = node.opType === 'Gather' && (node.domain === '' || node.domain === 'ai.onnx') ? quantized.get(node.input[0] ?? '') : undefined;
    const axis = node.attribute.find((a) => a.name === 'axis')?.i ?? 0n;
    if (!q || axis !== 0n || q.k % blockSize !== 0) return [node];
    count++;
    const [packed, scales] = q.tensors as [TensorProto, TensorProto];
    const blocks = q.k / blockSize;
    const prefix = `${node.name || node.output[0]}_Q4`;
    const scalesShape = create(TensorProtoSchema, {
      name: `${prefix}/scales_shape`,
      dataType: DataType.INT64,
      dims: [3n],
      rawData: new Uint8Array(BigInt64Array.of(BigInt(q.n), BigInt(blocks), 1n).buffer),
    });
    const rowShape = create(TensorProtoSchema, {
      name: `${prefix}/row_shape`,
      dataType: DataType.INT64,
      dims: [3n],
      rawData: new Uint8Array(BigInt64Array.of(0n, 0n, BigInt(q.k)).buffer),
    });
    for (const t of [scalesShape, rowShape]) initializers.set(t.name, t);
    return [
      create(NodeProtoSchema, { opType: 'Reshape', name: `${prefix}/scales`, input: [scales.name, scalesShape.name], output: [`${prefix}/scales`] }),
      create(NodeProtoSchema, {
        opType: 'GatherBlockQuantized',
        domain: MS_DOMAIN,
        name: prefix,
        input: [packed.name, node.input[1]!, `${prefix}/scales`],
        output: [`${prefix}/blocks`],
        attribute: [intAttr('gather_axis', 0), intAttr('quantize_axis', 2), intAttr('block_size', blockSize), intAttr('bits', 4)],
      }),
      create(NodeProtoSchema, { opType: 'Reshape', name: `${prefix}/rows`, input: [`${prefix}/blocks`, rowShape.name], output: [node.output[0]!] }),
    ];
  });
  return count;
}
