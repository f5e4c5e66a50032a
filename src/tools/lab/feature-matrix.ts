/**
 * Router inputs as matrices, for training and batch scoring: teacher forcing computes every extra
 * feature group once (`ALL_EXTRA_GROUPS`, 11 columns per position) and the previous position's hidden
 * state; a router's own groups are picked from that and appended to the hidden state, in the order the
 * ONNX graph concatenates them (hidden, previous hidden, extra features).
 *
 * @example
 * const x = routerInputs(forced, ['hidden', 'logit_stats']); // [count, hiddenSize + 3]
 */
import {
  EXTRA_WIDTH,
  extraGroups,
  extraWidth,
  FEATURE_GROUPS,
  readsPreviousHidden,
  type ExtraGroup,
  type FeatureGroup,
} from '../../edge/routing/router-features.ts';

/** Every extra group, in `extraGroups` order: the layout `writeExtraFeatures` writes for this list. */
export const ALL_EXTRA_GROUPS: readonly ExtraGroup[] = extraGroups(FEATURE_GROUPS);
export const ALL_EXTRA_WIDTH = ALL_EXTRA_GROUPS.reduce((s, g) => s + EXTRA_WIDTH[g], 0);

/** Column offset of each group within the all-groups layout. */
export function offsetOf(group: ExtraGroup): number {
  let offset = 0;
  for (const g of ALL_EXTRA_GROUPS) {
    if (g === group) return offset;
    offset += EXTRA_WIDTH[g];
  }
  throw new Error(`unknown feature group ${group}`);
}

/** The columns of `features`' extra groups out of all-groups rows (`[rows, ALL_EXTRA_WIDTH]`). */
export function pickExtraColumns(all: Float32Array, rows: number, features: readonly FeatureGroup[]): Float32Array {
  const width = extraWidth(features);
  const out = new Float32Array(rows * width);
  for (let r = 0; r < rows; r++) {
    let k = 0;
    for (const g of extraGroups(features)) {
      const from = r * ALL_EXTRA_WIDTH + offsetOf(g);
      out.set(all.subarray(from, from + EXTRA_WIDTH[g]), r * width + k);
      k += EXTRA_WIDTH[g];
    }
  }
  return out;
}

/** Width of the MLP's float input for `features` over a model with `hiddenSize`. */
export function inputWidth(hiddenSize: number, features: readonly FeatureGroup[]): number {
  return hiddenSize * (readsPreviousHidden(features) ? 2 : 1) + extraWidth(features);
}

/** Hidden state rows, then the previous position's, then the router's extra columns: the MLP's input matrix. */
export function routerInputs(
  data: { count: number; hiddenSize: number; hidden: Float32Array; previousHidden?: Float32Array; extra?: Float32Array },
  features: readonly FeatureGroup[],
): { features: Float32Array; width: number } {
  const h = data.hiddenSize;
  const e = extraWidth(features);
  const previous = readsPreviousHidden(features);
  const width = inputWidth(h, features);
  if (width === h) return { features: data.hidden, width };
  if ((previous && !data.previousHidden) || (e > 0 && !data.extra)) {
    throw new Error(`internal: a router reading ${features.join(', ')} needs ${previous ? 'previous hidden states' : 'extra features'} for every row`);
  }
  const extra = e > 0 ? pickExtraColumns(data.extra!, data.count, features) : new Float32Array(0);
  const out = new Float32Array(data.count * width);
  for (let r = 0; r < data.count; r++) {
    out.set(data.hidden.subarray(r * h, (r + 1) * h), r * width);
    if (previous) out.set(data.previousHidden!.subarray(r * h, (r + 1) * h), r * width + h);
    out.set(extra.subarray(r * e, (r + 1) * e), r * width + width - e);
  }
  return { features: out, width };
}
