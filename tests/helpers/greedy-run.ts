/** A model file's greedy continuation of a prompt, with every step's logits and hidden state, for comparing packs. */
import { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import { argmax } from '../../src/shared/model/logits.ts';
import { loadModelPack } from '../../src/shared/model/model-pack.ts';

export interface GreedyRun {
  ids: number[];
  logits: Float32Array[];
  hidden: Float32Array[];
}

/** `tokens` greedy ids after `prompt` from `model` (released by the caller), one step per id. */
export async function greedyRun(model: DecoderModel, prompt: readonly number[], tokens: number): Promise<GreedyRun> {
  const seq = model.newSequence();
  const out: GreedyRun = { ids: [], logits: [], hidden: [] };
  try {
    let step = await seq.append([...prompt]);
    for (let i = 0; i < tokens; i++) {
      out.logits.push(step.logits);
      out.hidden.push(step.hidden);
      out.ids.push(argmax(step.logits));
      step = await seq.append([out.ids.at(-1)!]);
    }
    return out;
  } finally {
    seq.dispose();
  }
}

/** The same for a pack folder's file, loaded and released here. */
export async function greedyRunOfPack(dir: string, file: string, prompt: readonly number[], tokens: number): Promise<GreedyRun> {
  const model = await DecoderModel.load(loadModelPack(dir, file), { threads: 1 });
  try {
    return await greedyRun(model, prompt, tokens);
  } finally {
    await model.release();
  }
}

/** The largest absolute difference over all steps (the step counts and row lengths asserted equal by the caller). */
export function maxStepDiff(a: readonly Float32Array[], b: readonly Float32Array[]): number {
  let max = 0;
  a.forEach((row, i) => row.forEach((v, j) => (max = Math.max(max, Math.abs(v - b[i]![j]!)))));
  return max;
}
