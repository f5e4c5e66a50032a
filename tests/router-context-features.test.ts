// The router's `previous_hidden` and `position` groups: teacher forcing records them as decoding sees
// them, and router.onnx, the batch scorer, the runtime router and the training MLP agree on them.
import { InProcessScorer } from '../src/tools/lab/cloud-scorer.ts';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodePrompt } from '../src/edge/loop/decoder-loop.ts';
import { positionFeature } from '../src/edge/routing/router-features.ts';
import { OnnxRouter, type RouterJson } from '../src/edge/routing/router.ts';
import { readJsonFile } from '../src/shared/model/model-pack.ts';
import { seededRandom } from '../src/shared/seeded-random.ts';
import { scoreWithRouterPack } from '../src/tools/router/batch-scorer.ts';
import { ALL_EXTRA_WIDTH, inputWidth, offsetOf, routerInputs } from '../src/tools/lab/feature-matrix.ts';
import { initialWeights, predict } from '../src/tools/router/mlp.ts';
import { MlpRouter } from '../src/tools/router/mlp-router.ts';
import { writeRouterPack } from '../src/tools/router/router-pack.ts';
import type { TeacherForced } from '../src/tools/lab/forced-records.ts';
import { teacherForce } from '../src/tools/lab/teacher-forcing.ts';
import { loadDemoPairModels, type DemoPairModels } from './helpers/demo-pair-models.ts';

const work = mkdtempSync(join(tmpdir(), 'router-context-'));
const PARAGRAPHS = ['Once upon a time, there was a little dog named Max.', 'Lily went to the park. She saw a big red ball and ran to it.'];

let pair: DemoPairModels;
let forced: TeacherForced;
beforeAll(async () => {
  pair = await loadDemoPairModels({ record: false });
  forced = await teacherForce({ edgeModel: pair.edge, cloud: new InProcessScorer(pair.cloudModel), tokenizer: pair.tokenizer, paragraphs: PARAGRAPHS });
});
afterAll(async () => {
  await pair.release();
  rmSync(work, { recursive: true, force: true });
});

describe('teacher forcing records the previous hidden state and the position', () => {
  test("each record's previous hidden state is the record before's hidden state, zeros at a paragraph's first; position log(1 + index)", () => {
    const h = forced.hiddenSize;
    const row = (a: Float32Array, r: number) => Array.from(a.subarray(r * h, (r + 1) * h));
    let index = 0;
    for (let r = 0; r < forced.count; r++) {
      const first = r === 0 || forced.paragraph[r] !== forced.paragraph[r - 1];
      index = first ? 0 : index + 1;
      expect(row(forced.previousHidden, r)).toEqual(first ? new Array(h).fill(0) : row(forced.hidden, r - 1));
      expect(forced.extra[r * ALL_EXTRA_WIDTH + offsetOf('position')]).toBe(Math.fround(positionFeature(index)));
    }
    // Every position with a next token is a record: BOS + tokens, less the last.
    const lengths = PARAGRAPHS.map((p) => encodePrompt({ edgeModel: pair.edge, tokenizer: pair.tokenizer }, p).length - 1);
    expect(forced.count).toBe(lengths[0]! + lengths[1]!);
  });

  test('the same values as decoding: a DecoderSequence fed token by token gives the recorded rows', async () => {
    const ids = encodePrompt({ edgeModel: pair.edge, tokenizer: pair.tokenizer }, PARAGRAPHS[0]!);
    const seq = pair.edge.newSequence();
    const h = forced.hiddenSize;
    try {
      for (let i = 0; i < 6; i++) {
        const step = await seq.append([ids[i]!]);
        Array.from(step.previousHidden).forEach((v, k) => expect(v).toBeCloseTo(forced.previousHidden[i * h + k]!, 4));
      }
    } finally {
      seq.dispose();
    }
  });
});

describe('a router reading the previous hidden state, the position and the token', () => {
  const features = ['hidden', 'previous_hidden', 'logit_stats', 'repetition', 'position', 'token'] as const;

  test('router.onnx, the batch scorer, the runtime router and the training MLP give the same scores', async () => {
    const h = forced.hiddenSize;
    const width = inputWidth(h, features);
    expect(width).toBe(2 * h + 9);
    // Random weights with a non-trivial standardization and token table: every input moves the score.
    const random = seededRandom(11);
    const weights = {
      ...initialWeights(width, 7, 3),
      mean: Float32Array.from({ length: width }, () => random() - 0.5),
      std: Float32Array.from({ length: width }, () => 0.5 + random()),
      tokens: { vocabSize: pair.edge.pack.vocabSize, ids: Int32Array.of(...new Set(forced.proposed)).sort(), vectors: new Float32Array(0) },
    };
    weights.tokens.vectors = Float32Array.from({ length: (weights.tokens.ids.length + 1) * 7 }, () => random() - 0.5);
    const out = join(work, 'context-router');
    await writeRouterPack(out, { weights, meta: { hidden_size: h, slm: 'x', default_threshold: 0.5, features: [...features] }, source: {} });

    const expected = predict(weights, routerInputs(forced, features).features, forced.count, forced.proposed);
    const batch = await scoreWithRouterPack(out, forced);
    for (let r = 0; r < forced.count; r++) expect(Math.abs(batch[r]! - expected[r]!)).toBeLessThan(1e-5);

    // The runtime routers, fed as the decoder loop feeds them: one position at a time from a sequence.
    const router = await OnnxRouter.load(out);
    const mlp = new MlpRouter(weights, features);
    const ids = encodePrompt({ edgeModel: pair.edge, tokenizer: pair.tokenizer }, PARAGRAPHS[0]!);
    const seq = pair.edge.newSequence();
    try {
      for (let i = 0; i < 8; i++) {
        const step = await seq.append([ids[i]!]);
        const context = ids.slice(0, i + 1);
        const score = await router.score(step.hidden, step.logits, context, step.previousHidden);
        expect(Math.abs(score - expected[i]!)).toBeLessThan(1e-4);
        expect(Math.abs((await mlp.score(step.hidden, step.logits, context, step.previousHidden)) - score)).toBeLessThan(1e-5);
        if (i === 0) {
          // No previous position given: zeros, as at the first position.
          expect(await router.score(step.hidden, step.logits, context)).toBe(score);
        } else {
          // The previous hidden state is read: another position's gives another score.
          expect(Math.abs((await router.score(step.hidden, step.logits, context, step.hidden)) - score)).toBeGreaterThan(1e-6);
        }
      }
      await expect(router.score(forced.hidden.slice(0, h), new Float32Array(pair.edge.pack.vocabSize), [1], new Float32Array(h + 1))).rejects.toThrow(
        `the previous hidden state has ${h + 1} values, the current one ${h}`,
      );
    } finally {
      seq.dispose();
      await router.release();
    }
  });

  test('a pack whose router.json reads the previous hidden state but whose router.onnx does not is refused; so are rows without it', async () => {
    const h = forced.hiddenSize;
    const out = join(work, 'no-previous-router');
    await writeRouterPack(out, { weights: initialWeights(h, 4, 0), meta: { hidden_size: h, slm: 'x', default_threshold: 0.5 }, source: {} });
    const meta = readJsonFile(join(out, 'router.json')) as RouterJson;
    writeFileSync(join(out, 'router.json'), JSON.stringify({ ...meta, features: ['hidden', 'previous_hidden'] }));
    await expect(OnnxRouter.load(out)).rejects.toThrow("router.json's features (hidden, previous_hidden) do not match router.onnx's inputs (hidden_states)");
    await expect(scoreWithRouterPack(out, { count: forced.count, hidden: forced.hidden })).rejects.toThrow('the rows lack some of them');
  });
});
