/**
 * Scores many hidden-state rows with a router pack's `router.onnx` in batches: for training reports,
 * evaluation and tests (the decoder loop scores one position at a time through `OnnxRouter`).
 */
import { join, resolve } from 'node:path';
import type { RouterJson } from '../../edge/router.ts';
import { AppError } from '../../shared/errors.ts';
import { readJsonFile } from '../../shared/model-pack.ts';
import { ort } from '../../shared/ort.ts';
import { runSession } from '../../shared/run-session.ts';

const BATCH_ROWS = 4096;

/** Scores `rows` rows of `hidden` (`[rows, hiddenSize]` row-major). */
export async function scoreWithRouterPack(dir: string, hidden: Float32Array, rows: number): Promise<Float32Array> {
  const root = resolve(dir);
  const meta = readJsonFile(join(root, 'router.json')) as RouterJson;
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
      const input = new ort.Tensor('float32', hidden.subarray(start * width, (start + n) * width), [n, width]);
      const out = await runSession(session, { hidden_states: input });
      scores.set(out.score!.data as Float32Array, start);
      out.score!.dispose();
    }
    return scores;
  } finally {
    await session.release();
  }
}
