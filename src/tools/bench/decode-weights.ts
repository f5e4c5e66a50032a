/**
 * Bytes a decoder reads per generated token, from the pack's own initializers: every weight once (a
 * tied embedding that is also the LM head is read whole by the head), except weights used only as
 * lookup tables by Gather (the token embedding of an untied model), of which one row is read, and
 * GroupQueryAttention's cos/sin tables, of which the row of the new position is read; plus the KV
 * cache, which attention reads whole at every step.
 */
import type { TensorProto } from 'onnx-buf';
import type { ModelPack } from '../../shared/model/model-pack.ts';
import { elemBits } from '../models/graph-index.ts';
import { readModel } from '../models/onnx-file.ts';
import { allNodes } from '../../shared/model/onnx-graph.ts';

export interface WeightTraffic {
  /** Bytes of weights read per decode step. */
  perToken: number;
  /** Bytes of all initializers. */
  total: number;
  /** Initializers read one row at a time (Gather-only lookups, GroupQueryAttention's rotary tables). */
  lookups: string[];
}

function bytesOf(t: TensorProto): number {
  const elements = t.dims.reduce((n, d) => n * Number(d), 1);
  return Math.ceil((elements * elemBits(t.dataType)) / 8);
}

export function weightTraffic(modelPath: string): WeightTraffic {
  const graph = readModel(modelPath).graph!;
  const uses = new Map<string, { opType: string; slot: number }[]>();
  for (const node of allNodes(graph)) {
    node.input.forEach((name, slot) => {
      if (!uses.has(name)) uses.set(name, []);
      uses.get(name)!.push({ opType: node.opType, slot });
    });
  }
  let perToken = 0;
  let total = 0;
  const lookups: string[] = [];
  for (const t of graph.initializer) {
    const bytes = bytesOf(t);
    total += bytes;
    const u = uses.get(t.name) ?? [];
    const isLookup = (x: { opType: string; slot: number }) =>
      (x.opType === 'Gather' && x.slot === 0) || (x.opType === 'GroupQueryAttention' && (x.slot === 7 || x.slot === 8));
    if (u.length > 0 && t.dims.length >= 2 && u.every(isLookup)) {
      lookups.push(t.name);
      perToken += bytes / Number(t.dims[0]);
    } else {
      perToken += bytes;
    }
  }
  return { perToken, total, lookups };
}

/** Bytes of K and V (float32) attention reads in one decode step with `context` tokens in the cache. */
export function kvCacheBytes(pack: Pick<ModelPack, 'numLayers' | 'numKvHeads' | 'headDim'>, context: number): number {
  return 2 * pack.numLayers * pack.numKvHeads * context * pack.headDim * 4;
}
