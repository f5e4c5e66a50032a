/**
 * TokenConstraint.pick over the real Qwen vocabulary (151,936 logits, 151,669 tokens): greedy takes the
 * allowed id of the highest logit (the lowest of equals), read in place from the mask's words; sampled draws
 * only allowed ids; neither ever picks a padded id past the tokenizer's. Checked step by step along outputs
 * of a JSON schema against the mask itself.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compilerFor, stopIdsOf, type ConstraintEngine } from '../src/edge/constraint/generation-constraint.ts';
import { readConstraint } from '../src/edge/constraint/constraint-spec.ts';
import { TokenConstraint } from '../src/edge/constraint/token-constraint.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';

const work = mkdtempSync(join(tmpdir(), 'constraint-pick-'));
let engine: ConstraintEngine;
const SCHEMA = { type: 'object', properties: { name: { type: 'string' }, n: { type: 'integer' }, ok: { type: 'boolean' } }, required: ['name', 'n', 'ok'] };

beforeAll(async () => {
  const dir = join(work, 'qwen');
  await writeRandomPack({ preset: 'tiny-qwen2', out: dir, seed: 3, hiddenStatesOutput: false });
  engine = { edgeModel: { pack: loadModelPack(dir) }, tokenizer: await TextTokenizer.fromPack(dir) };
}, 120_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/** What the mask allows below `limit`, read bit by bit. */
function allowed(mask: Int32Array, limit: number): number[] {
  const ids: number[] = [];
  for (let id = 0; id < limit; id++) if ((mask[id >>> 5]! >>> (id & 31)) & 1) ids.push(id);
  return ids;
}

test('greedy and sampled picks along outputs of a schema: only allowed ids, greedy the best of them', async () => {
  const compiled = await compilerFor(engine).compile(readConstraint({ jsonSchema: SCHEMA })!);
  const limit = engine.tokenizer.vocabSize;
  const width = engine.edgeModel.pack.vocabSize;
  expect(width).toBeGreaterThan(limit);
  let steps = 0;
  for (const temperature of [0, 1]) {
    const random = seeded(7 + temperature);
    const constraint = await TokenConstraint.open(compiled, stopIdsOf(engine));
    const reference = await TokenConstraint.open(compiled, stopIdsOf(engine));
    try {
      for (let step = 0; step < 30 && !(await constraint.finished()); step++) {
        const logits = Float32Array.from({ length: width }, () => Math.round(random() * 8));
        // A padded id with the highest logit of all: never chosen.
        logits[width - 1] = 100;
        const mask = await (reference as unknown as { mask(): Promise<Int32Array> }).mask();
        const ids = allowed(mask, limit);
        const id = await constraint.pick(logits, { temperature, topP: 1, random, vocabLimit: limit });
        expect(ids).toContain(id);
        if (temperature === 0) {
          const best = ids.reduce((a, b) => (logits[b]! > logits[a]! ? b : a));
          expect(id).toBe(best);
        }
        expect((reference as unknown as { tryAccept(id: number): boolean }).tryAccept(id)).toBe(true);
        steps++;
      }
    } finally {
      constraint.dispose();
      reference.dispose();
    }
  }
  expect(steps).toBeGreaterThan(20);
}, 120_000);
