/**
 * The fused layout's attention for decode steps (one new position per row), written with standard ops on
 * the KV buffer as it is fed (`decodeAttention: 'matmul'`), while prefills and other multi-token appends
 * keep onnxruntime's GroupQueryAttention. An If per layer chooses on the number of new positions alone,
 * so a row takes the same path, and gets the same floats, alone or in any batch.
 *
 * Why: GroupQueryAttention, given a past that is not also its present (the edge fetches only the new
 * positions, see decoder-graph-fused.ts), first copies each row's whole cache into a new present tensor,
 * then runs two small matrix products per row and head. Here nothing is copied: the scores are taken
 * against the past buffer in place and against the new position apart, one softmax over both, and the
 * query heads that share a KV head go through one product (`[batch, kv_heads, group, head_dim]`). The
 * price is some twenty small kernels a layer where the op is one, so it gains only once the cache is long,
 * and sooner in a batch than for one row (docs/model-packs.md, "Decode steps through standard ops", says
 * how to find where on a machine). Prefills stay with the op: with many new positions the copy is a small
 * part of its work, and its one kernel runs their attention faster than these ops.
 *
 * The rotary embedding is applied to q and k of every head at once, half-split as GroupQueryAttention does
 * (`rotary_interleaved=0`): x·cos + rotate_half(x)·sin, rotate_half as a product with a signed permutation
 * matrix (exact: one non-zero term per output). The score scale rides on the queries' cos and sin; v heads
 * pass through (cos 1, sin 0).
 */
import { AppError } from '../../shared/errors.ts';
import { DataType, type GraphBuilder } from '../../shared/model/onnx-graph.ts';
import type { DecodeAttention, DecoderLayout } from './decoder-graph-options.ts';

export type { DecodeAttention } from './decoder-graph-options.ts';

/** How the fused layout's decode steps attend: standard ops on the buffer in place, or GroupQueryAttention like prefills. */
export const DECODE_ATTENTIONS: readonly DecodeAttention[] = ['gqa', 'matmul'];
/**
 * GroupQueryAttention by default: the standard ops cost more than they save below a few hundred cached
 * positions, where most steps of a short chat are, and win only past them (docs/model-packs.md).
 */
export const DEFAULT_DECODE_ATTENTION: DecodeAttention = 'gqa';

/** `--decode-attention`: gqa or matmul; the default when omitted. */
export function parseDecodeAttention(value: string | undefined): DecodeAttention {
  if (value === undefined) return DEFAULT_DECODE_ATTENTION;
  if (!(DECODE_ATTENTIONS as readonly string[]).includes(value))
    throw new AppError('INVALID_ARGUMENT', `--decode-attention must be ${DECODE_ATTENTIONS.join(' or ')}, got ${value}`);
  return value as DecodeAttention;
}

/**
 * What a pack's pack-source.json records of the choice: `{ decodeAttention: 'matmul' }` for a fused
 * graph built so, nothing for the default, so packs built before the option existed stay up to date.
 */
export function decodeAttentionSource(layout: DecoderLayout | undefined, decodeAttention: DecodeAttention | undefined): { decodeAttention?: 'matmul' } {
  return layout === 'fused' && decodeAttention === 'matmul' ? { decodeAttention } : {};
}

export interface AttentionShape {
  numHeads: number;
  numKvHeads: number;
  /** The (padded) head size of q, k, v and the cache. */
  headDim: number;
  /** The scores' scale, 1/√(the model's own head size). */
  scale: number;
}

/** What every layer's decode-step attention shares, computed once per step (decodeStepInputs). */
export interface DecodeStepInputs {
  shape: AttentionShape;
  /** `[batch, heads + 2·kv_heads, head_dim]` factors of the rotation at each row's position: x·cos + (x·R)·sin. */
  cos: string;
  sin: string;
  rotateHalf: string;
  /** Additive mask `[batch, 1, 1, capacity + 1]`: 0 for the row's cached positions and its new one, −∞ elsewhere. */
  mask: string;
  /** `[capacity, 1]`, to split the probabilities between the buffer and the new position. */
  splitSizes: string;
}

interface GraphInputs {
  inputIds: string;
  /** Per row, the positions after this run minus one: for a decode step, the positions already cached. */
  seqlensK: string;
  /** A past buffer, `[batch, kv_heads, capacity, head_dim]`: every layer's has the same capacity. */
  pastKey: string;
  /** The `[maxPositions, head_dim / 2]` rotary tables. */
  cos: string;
  sin: string;
}

/**
 * `isDecodeStep` (a bool scalar: one new position per row) and the shared inputs of decode-step
 * attention, computed by an If of their own only for decode steps, so that a prefill does not pay for them.
 */
export function decodeStepSwitch(g: GraphBuilder, shape: AttentionShape, inputs: GraphInputs): { isDecodeStep: string; inputs: DecodeStepInputs } {
  const newLength = g.op('Shape', [inputs.inputIds], { start: 1, end: 2 });
  const isDecodeStep = g.op('Squeeze', [g.op('Equal', [newLength, g.ints('const.attn.one_position', [1])])]);
  let rotateHalf = '';
  // Both branches yield the same ranks, so that onnxruntime's shape inference can merge them.
  const computed = g.subgraph('attention/decode_step_inputs', (b) => {
    const shared = decodeStepInputs(b, shape, inputs);
    rotateHalf = shared.rotateHalf;
    b.output(shared.cos, shared.cos, DataType.FLOAT, ['batch_size', 'heads', 'head_dim']);
    b.output(shared.sin, shared.sin, DataType.FLOAT, ['batch_size', 'heads', 'head_dim']);
    b.output(shared.mask, shared.mask, DataType.FLOAT, ['batch_size', 1, 1, 'keys']);
    b.output(shared.splitSizes, shared.splitSizes, DataType.INT64, [2]);
  });
  const unused = g.subgraph('attention/prefill', (b) => {
    const placeholders: [string, DataType][] = [
      [b.floats('const.attn.unused_cos', [1], [1, 1, 1]), DataType.FLOAT],
      [b.floats('const.attn.unused_sin', [0], [1, 1, 1]), DataType.FLOAT],
      [b.floats('const.attn.unused_mask', [0], [1, 1, 1, 1]), DataType.FLOAT],
      [b.ints('const.attn.unused_split', [0, 1]), DataType.INT64],
    ];
    for (const [value, type] of placeholders) {
      const copy = b.op('Identity', [value]);
      b.output(copy, copy, type);
    }
  });
  const [cos, sin, mask, splitSizes] = g.ops('If', [isDecodeStep], { then_branch: computed, else_branch: unused }, 4) as [string, string, string, string];
  return { isDecodeStep, inputs: { shape, cos, sin, rotateHalf, mask, splitSizes } };
}

function decodeStepInputs(g: GraphBuilder, shape: AttentionShape, inputs: GraphInputs): DecodeStepInputs {
  const { numHeads: h, numKvHeads: kv, headDim: hd, scale } = shape;
  const half = hd / 2;
  const cached = g.op('Cast', [inputs.seqlensK], { to: DataType.INT64 });

  // cos and sin at each row's new position, both halves, for every head: [batch, heads, head_dim].
  const heads = h + 2 * kv;
  const headFactor = (f: (head: number) => number, name: string) =>
    g.floats(
      `const.attn.${name}`,
      Float32Array.from({ length: heads * hd }, (_, i) => f(Math.floor(i / hd))),
      [heads, hd],
    );
  const atPosition = (table: string, name: string) => {
    const rows = g.op('Gather', [table, cached]);
    return g.op('Unsqueeze', [g.op('Concat', [rows, rows], { axis: -1 }), g.ints(`const.attn.${name}_axis`, [1])]);
  };
  // q heads: rotated and scaled; k heads: rotated; v heads: cos 1, sin 0.
  const rotated = (head: number) => (head < h ? scale : head < h + kv ? 1 : 0);
  const cos = g.op('Add', [
    g.op('Mul', [atPosition(inputs.cos, 'cos'), headFactor(rotated, 'cos_scale')]),
    headFactor((head) => (head < h + kv ? 0 : 1), 'cos_pass'),
  ]);
  const sin = g.op('Mul', [atPosition(inputs.sin, 'sin'), headFactor(rotated, 'sin_scale')]);
  const rotation = new Float32Array(hd * hd);
  for (let j = 0; j < half; j++) {
    rotation[(j + half) * hd + j] = -1; // out[j] = −x[j + half]
    rotation[j * hd + j + half] = 1; // out[j + half] = x[j]
  }
  const rotateHalf = g.floats('const.attn.rotate_half', rotation, [hd, hd]);

  // A row sees the buffer's positions before its own length, and its new position (the last column).
  const capacity = g.op('Shape', [inputs.pastKey], { start: 2, end: 3 });
  const zero = g.ints('const.attn.zero', [0], []);
  const one = g.ints('const.attn.one', [1], []);
  const visible = g.op('Less', [g.op('Range', [zero, g.op('Squeeze', [capacity]), one]), g.op('Unsqueeze', [cached, g.ints('const.attn.axis_1', [1])])]);
  const pastMask = g.op('Where', [visible, g.floats('const.attn.open', [0], []), g.floats('const.attn.minus_infinity', [-Infinity], [])]);
  const newColumn = g.op('Expand', [
    g.floats('const.attn.open_column', [0], [1, 1]),
    g.op('Concat', [g.op('Shape', [inputs.inputIds], { start: 0, end: 1 }), g.ints('const.attn.one_column', [1])], { axis: 0 }),
  ]);
  const mask = g.op('Unsqueeze', [g.op('Concat', [pastMask, newColumn], { axis: -1 }), g.ints('const.attn.mask_axes', [1, 2])]);
  return { shape, cos, sin, rotateHalf, mask, splitSizes: g.op('Concat', [capacity, g.ints('const.attn.one_split', [1])], { axis: 0 }) };
}

/**
 * One layer's attention for a decode step, on `qkv` (`[batch, 1, (heads + 2·kv_heads)·head_dim]`, bias
 * added) against its past buffers. Returns the output `[batch, 1, heads·head_dim]` and the new position's k
 * (rotated) and v, `[batch, kv_heads, 1, head_dim]`, which the caller writes into its buffers. With one new
 * position every reshape below moves no data.
 */
export function decodeStepAttention(
  g: GraphBuilder,
  shared: DecodeStepInputs,
  qkv: string,
  past: { key: string; value: string },
  name: string,
): { output: string; newKey: string; newValue: string } {
  const { numHeads: h, numKvHeads: kv, headDim: hd } = shared.shape;
  const group = h / kv;
  const shape = (suffix: string, values: number[]) => g.ints(`${name}/${suffix}`, values);
  const x = g.op('Reshape', [qkv, shape('heads_shape', [0, h + 2 * kv, hd])]);
  const rotated = g.op('Add', [g.op('Mul', [x, shared.cos]), g.op('Mul', [g.op('MatMul', [x, shared.rotateHalf]), shared.sin])]);
  const [q, k, v] = g.ops('Split', [rotated, shape('qkv_split', [h, kv, kv])], { axis: 1 }, 3);
  // The queries of one KV head in one product: [batch, kv, group, hd].
  const grouped = g.op('Reshape', [q!, shape('grouped_shape', [0, kv, group, hd])]);
  const newKey = g.op('Reshape', [k!, shape('new_shape', [0, kv, 1, hd])]);
  const newValue = g.op('Reshape', [v!, shape('new_value_shape', [0, kv, 1, hd])]);
  // onnxruntime folds the Transpose into its MatMul (FusedMatMul, transB): the past is read in place.
  const pastScores = g.op('MatMul', [grouped, g.op('Transpose', [past.key], { perm: [0, 1, 3, 2] })]);
  const newScores = g.op('MatMul', [grouped, g.op('Reshape', [k!, shape('key_column_shape', [0, kv, hd, 1])])]);
  const weights = g.op('Softmax', [g.op('Add', [g.op('Concat', [pastScores, newScores], { axis: -1 }), shared.mask])], { axis: -1 });
  const [pastWeights, newWeights] = g.ops('Split', [weights, shared.splitSizes], { axis: -1 }, 2);
  const mixed = g.op('Add', [g.op('MatMul', [pastWeights!, past.value]), g.op('MatMul', [newWeights!, newValue])]);
  return { output: g.op('Reshape', [mixed, shape('output_shape', [0, 1, h * hd])]), newKey, newValue };
}
