/**
 * Diagnostic: how well do router packs, and the top-1 / entropy baselines, rank what routing a position
 * takes off the cloud's NLL of the output, on the states free-running generation reaches? Generates from
 * held-out prompts with the top-1 router at a few thresholds, teacher-forces both models along those
 * trajectories, and at each share reports the NLL gain of the positions each scorer routes as a share of
 * the most any choice of that many positions could take (the immediate gain only: what a routed token
 * then changes further on is not counted).
 *
 * @example
 * ```sh
 * bun scripts/router-on-policy-gain.ts --edge-model models/stories260k-distilled-1l --cloud-model models/stories260k \
 *   --text ../shared/assets/datasets/tinystories/tinystories_excerpt_197k.txt --router /tmp/r1 --router /tmp/r2
 * ```
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { openToolCloud } from '../src/tools/lab/tool-cloud.ts';
import { documentCount, readTrainingCorpus } from '../src/tools/lab/training-corpus.ts';
import { chatTemplateFor, trainingDocuments } from '../src/tools/lab/training-documents.ts';
import { splitByParagraph } from '../src/tools/lab/text-corpus.ts';
import { generateAll } from '../src/tools/lab/generation-runs.ts';
import { ForcedRecords } from '../src/tools/lab/forced-records.ts';
import { forcedBaselineScores, TopProbabilityRouter } from '../src/tools/lab/baseline-routers.ts';
import { scoreWithRouterPack } from '../src/tools/router/batch-scorer.ts';
import { lowestSelection } from '../src/tools/lab/ratio-matching.ts';
import { NLL_FLOOR } from '../src/tools/router/labels.ts';

const { values } = parseArgs({
  options: {
    'edge-model': { type: 'string' },
    'cloud-model': { type: 'string' },
    text: { type: 'string' },
    'report-text': { type: 'string' },
    'train-fraction': { type: 'string', default: '0.8' },
    router: { type: 'string', multiple: true, default: [] },
    prompts: { type: 'string', default: '48' },
    tokens: { type: 'string', default: '48' },
    json: { type: 'boolean', default: false },
  },
});
const edgePack = loadModelPack(values['edge-model']!);
const tokenizer = await TextTokenizer.fromPack(edgePack.dir);
const edgeModel = await DecoderModel.load(edgePack);
const cloud = await openToolCloud({ pack: values['cloud-model']! }, edgePack, tokenizer);
const corpus = readTrainingCorpus(values['report-text'] ?? values.text!);
const count = documentCount(corpus).count;
const heldOut = values['report-text'] ? [...Array(count).keys()] : splitByParagraph([...Array(count).keys()], Number(values['train-fraction'])).heldOut;
const documents = trainingDocuments(corpus, { edgeModel, tokenizer }, chatTemplateFor(corpus, tokenizer, edgePack.dir));
// Past the report's first 16 prompts, so that this does not read what the report generates from.
const prompts = documents.rolloutPrompts(heldOut, 16).slice(16, 16 + Number(values.prompts));
const records = new ForcedRecords(edgeModel, cloud.scorer);
const edge = { edgeModel, tokenizer, cloud: cloud.client };
for (const [i, threshold] of [0, 0.3, 0.5, 0.7].entries()) {
  const run = await generateAll(edge, new TopProbabilityRouter(), prompts, { threshold, maxNewTokens: Number(values.tokens) });
  for (const [k, item] of run.items.entries()) await records.addSequence([...item.promptIds, ...item.ids], i * 1000 + k, { first: item.promptIds.length - 1 });
}
const forced = records.build();
const gain = Float64Array.from({ length: forced.count }, (_, i) =>
  Math.max(0, Math.log(Math.max(forced.cloudTopProb[i]!, NLL_FLOOR)) - Math.log(Math.max(forced.cloudProbOfEdgeTop1[i]!, NLL_FLOOR))),
);
const scorers: Record<string, ArrayLike<number>> = { ...forcedBaselineScores(forced) };
for (const dir of values.router!) {
  // Named by what it was trained with: the folders are scratch ones.
  const training = (JSON.parse(readFileSync(join(dir, 'router.json'), 'utf8')) as { training: { label_rule: string; on_policy_label_rule: string } }).training;
  scorers[`router (text: ${training.label_rule}; rollouts: ${training.on_policy_label_rule})`] = await scoreWithRouterPack(dir, forced);
}
const shares = [0.1, 0.2, 0.3];
const best = (k: number) =>
  [...gain]
    .sort((a, b) => b - a)
    .slice(0, k)
    .reduce((s, g) => s + g, 0);
const rows = Object.entries(scorers).map(([name, scores]) => ({
  name,
  captured: shares.map((share) => {
    const k = Math.round(share * forced.count);
    const { mask } = lowestSelection(scores, k);
    let sum = 0;
    for (let i = 0; i < forced.count; i++) if (mask[i]) sum += gain[i]!;
    return sum / best(k);
  }),
}));
if (values.json) console.log(JSON.stringify({ positions: forced.count, shares, rows }));
else {
  console.log(`${forced.count} on-policy positions; share of the best possible immediate NLL gain at ${shares.join(' / ')} routed`);
  for (const r of rows) console.log(`${r.name.padEnd(60)} ${r.captured.map((c) => (c * 100).toFixed(1).padStart(6)).join(' ')}`);
}
await cloud.close();
await edgeModel.release();
