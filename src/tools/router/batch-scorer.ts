/**
 * Scores many rows (hidden state, previous hidden state, extra features, proposed token) with a router
 * pack's `router.onnx` in batches of 4,096: for the routing curve, the evaluation and tests.
 *
 * Why not OnnxRouter, which runs the same graph: it scores one position at a time from the edge model's
 * logits (the decoding loop's step), on one thread; teacher-forced records keep the features computed
 * once instead of the logits, and a batch wants every thread. The scores agree (tests/router-context-features.test.ts).
 *
 * @example
 * const scores = await scoreWithRouterPack('models/router-stories260k-3l', forced); // one per record
 */
import { join, resolve } from 'node:path';
import type { RouterJson } from '../../edge/routing/router.ts';
import { AppError } from '../../shared/errors.ts';
import { readJsonFile } from '../../shared/model/model-pack.ts';
import { ort, type OrtTensor } from '../../shared/model/ort.ts';
import { extraWidth, parseFeatureGroups, readsPreviousHidden, readsToken } from '../../edge/routing/router-features.ts';
import { pickExtraColumns } from '../lab/feature-matrix.ts';
import { runSession } from '../../shared/model/run-session.ts';

const BATCH_ROWS = 4096;

/** What the batch scorer reads of each row; teacher forcing's records have it all. */
export interface ScoredRows {
  /** Rows. */
  count: number;
  /** `[count, hiddenSize]` row-major. */
  hidden: Float32Array;
  /** The hidden state of each row's previous position, `[count, hiddenSize]`, for packs that read it. */
  previousHidden?: Float32Array;
  /** Every row's extra features in the layout of `ALL_EXTRA_GROUPS`, of which the pack's own groups are picked. */
  extra?: Float32Array;
  /** Every row's proposed token (the edge's top-1), for packs that read it. */
  proposed?: Int32Array;
}

/** Scores every row of `data` with the router pack in `dir`. */
export async function scoreWithRouterPack(dir: string, data: ScoredRows): Promise<Float32Array> {
  const { hidden, count: rows, extra, proposed, previousHidden } = data;
  const root = resolve(dir);
  const meta = readJsonFile(join(root, 'router.json')) as RouterJson;
  const features = parseFeatureGroups(meta.features, join(root, 'router.json'));
  const extraCols = extraWidth(features);
  const previous = readsPreviousHidden(features);
  if ((extraCols > 0 && !extra) || (readsToken(features) && !proposed) || (previous && !previousHidden)) {
    throw new AppError('INTERNAL', `${root}: the router reads ${features.join(', ')}; the rows lack some of them`);
  }
  const picked = extraCols > 0 ? pickExtraColumns(extra!, rows, features) : undefined;
  const width = meta.hidden_size;
  if (hidden.length !== rows * width) {
    throw new AppError(
      'FAILED_PRECONDITION',
      `${root}: the router expects hidden size ${width}, the edge model gives ${hidden.length / Math.max(rows, 1)} (router trained for another model?)`,
    );
  }
  const session = await ort.InferenceSession.create(join(root, 'router.onnx'));
  try {
    const scores = new Float32Array(rows);
    for (let start = 0; start < rows; start += BATCH_ROWS) {
      const n = Math.min(BATCH_ROWS, rows - start);
      const feeds: Record<string, OrtTensor> = { hidden_states: new ort.Tensor('float32', hidden.subarray(start * width, (start + n) * width), [n, width]) };
      if (previous) feeds.previous_hidden_states = new ort.Tensor('float32', previousHidden!.subarray(start * width, (start + n) * width), [n, width]);
      if (readsToken(features)) feeds.proposed_token = new ort.Tensor('int64', BigInt64Array.from(proposed!.subarray(start, start + n), BigInt), [n]);
      if (picked) feeds.extra_features = new ort.Tensor('float32', picked.subarray(start * extraCols, (start + n) * extraCols), [n, extraCols]);
      const out = await runSession(session, feeds);
      scores.set(out.score!.data as Float32Array, start);
      out.score!.dispose();
    }
    return scores;
  } finally {
    await session.release();
  }
}
