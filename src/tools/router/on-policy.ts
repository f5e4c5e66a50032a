/**
 * One on-policy (DAgger) round's data: the system generates with the current router, joint mode, from
 * training prompts, once greedily and once sampled (temperature 1) at each of a few thresholds; then
 * both models are teacher-forced along those trajectories, so every position where the router decided
 * becomes a record in the states the system itself reaches (loops included), labelled by the cloud. Both
 * run against the cloud the tool was given (tool-cloud.ts): through a shim, the rollouts are the real
 * decoding loop routing to it.
 *
 * @example
 * const round = await collectTrajectories({ edgeModel, cloud, tokenizer, router, prompts, thresholds: [0.3, 0.5], maxNewTokens: 48, seed: 0 });
 */
import type { Router } from '../../edge/routing/router.ts';
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import type { ToolCloud } from '../lab/tool-cloud.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { freeRunningFigures, type FreeRunningFigures } from '../lab/free-running-metrics.ts';
import { generateAll, type Prompt } from '../lab/generation-runs.ts';
import { ForcedRecords, type TeacherForced } from '../lab/forced-records.ts';
import { generationStopIds } from '../../shared/model/stop-ids.ts';
import { concatHorizon, horizonGains, type HorizonReading } from './horizon-gain.ts';

export interface RolloutOptions {
  edgeModel: DecoderModel;
  cloud: Pick<ToolCloud, 'client' | 'scorer'>;
  tokenizer: TextTokenizer;
  router: Router;
  /** Text openings, or chat prompts (a conversation's turns up to a user message, with the generation prompt). */
  prompts: readonly Prompt[];
  /** Each prompt is generated at one of these (in turn), greedily and sampled. */
  thresholds: readonly number[];
  maxNewTokens: number;
  seed: number;
  /** Greedy edge tokens after each choice for the gain over a horizon (horizon-gain.ts); none when absent. */
  horizon?: number;
  onPrompt?: (done: number, total: number) => void;
}

export interface Rollouts {
  forced: TeacherForced;
  trajectories: number;
  tokens: number;
  routedRatio: number;
  /** Loops among the greedy trajectories: what the round's router left to fix. */
  greedy: FreeRunningFigures;
  /** Per record, what a route changes over the horizon, when `horizon` was given. */
  horizon?: HorizonReading;
}

export async function collectTrajectories(o: RolloutOptions): Promise<Rollouts> {
  const edge = { edgeModel: o.edgeModel, tokenizer: o.tokenizer, cloud: o.cloud.client };
  const records = new ForcedRecords(o.edgeModel, o.cloud.scorer);
  const greedyIds: number[][] = [];
  let tokens = 0;
  let routed = 0;
  let trajectories = 0;
  const horizon: HorizonReading[] = [];
  const stopIds = new Set(generationStopIds(o.edgeModel.pack, o.tokenizer));
  for (const [i, prompt] of o.prompts.entries()) {
    const threshold = o.thresholds[i % o.thresholds.length]!;
    for (const temperature of [0, 1]) {
      const run = await generateAll(edge, o.router, [prompt], { threshold, maxNewTokens: o.maxNewTokens, temperature, seed: o.seed + i });
      const item = run.items[0]!;
      if (temperature === 0) greedyIds.push(item.ids);
      tokens += run.tokens;
      routed += run.routed;
      trajectories++;
      // Records start at the prompt's last position: the first step the router decided.
      const ids = [...item.promptIds, ...item.ids];
      const first = item.promptIds.length - 1;
      const reading = await records.read(ids, { first });
      records.add(reading, i);
      if (o.horizon !== undefined)
        horizon.push(await horizonGains({ edgeModel: o.edgeModel, scorer: o.cloud.scorer, ids, first, choices: reading.rows, tokens: o.horizon, stopIds }));
    }
    o.onPrompt?.(i + 1, o.prompts.length);
  }
  const forced = records.build();
  const rollouts: Rollouts = { forced, trajectories, tokens, routedRatio: tokens ? routed / tokens : 0, greedy: freeRunningFigures(greedyIds) };
  if (o.horizon !== undefined) rollouts.horizon = concatHorizon(horizon);
  return rollouts;
}
