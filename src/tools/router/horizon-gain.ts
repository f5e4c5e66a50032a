/**
 * What routing a position of a rollout changes past the next token. `cloud-nll` weighs a route by what it
 * takes off the cloud's NLL of the routed token alone; but the edge writes what follows from whichever token
 * was chosen, and a route at a position where the edge is unsure steers what it writes next. So at each
 * position where the two top-1s differ, the edge writes HORIZON_TOKENS greedy tokens after each choice, and
 * the gain is the cloud's NLL of the kept branch (the edge's token and what follows it) less that of the
 * routed one (the cloud's token and what follows it). With no tokens after the choice it is cloud-nll's gain.
 * A branch ends at a stop id, as generation does (a chat reply's end of turn): what the edge would write after
 * it is never shown. Two branches of different lengths are compared by their NLL per token, scaled to the
 * longer one's length (equal lengths: the plain difference), so that ending sooner is not a gain by itself.
 *
 * @example
 * const { gains } = await horizonGains({ edgeModel, scorer, ids, first, choices, tokens: HORIZON_TOKENS, stopIds });
 */
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import type { DecoderSequence } from '../../shared/model/decoder-sequence.ts';
import { argmax, logSumExp } from '../../shared/model/logits.ts';
import { InProcessScorer, type CloudScorer } from '../lab/cloud-scorer.ts';
import { repeatsFourGramAt } from '../lab/forced-records.ts';
import { median } from '../../shared/statistics.ts';

/** Greedy edge tokens written after each choice before the two branches are compared. */
export const HORIZON_TOKENS = 4;

export interface HorizonOptions {
  edgeModel: DecoderModel;
  scorer: CloudScorer;
  /** The trajectory: its prompt and generated ids. */
  ids: readonly number[];
  /** The position of the first choice: choices[j] is made after ids[0..first + j]. */
  first: number;
  /** At each position, the edge's top-1 and the cloud's (what a route would write). */
  choices: readonly { proposed: number; cloudTop: number }[];
  tokens: number;
  /** The ids generation ends at (stop-ids.ts): a branch ends with the first it writes. */
  stopIds: ReadonlySet<number>;
}

/** The cloud's NLL of `branch` written after `prefix` (its last window's worth): one Score call. */
async function scoredNll(scorer: CloudScorer, prefix: readonly number[], branch: readonly number[]): Promise<number> {
  const all = [...prefix, ...branch];
  const window = all.slice(Math.max(0, all.length - scorer.maxContext));
  const positions = await scorer.score(window);
  let nll = 0;
  for (let j = window.length - branch.length; j < window.length; j++) nll -= positions[j - 1]!.nextLogprob;
  return nll;
}

/**
 * The cloud's NLL of branches after a prefix that grows one id at a time. A Score call reads the whole prefix
 * again for each branch, and that was most of the horizon's cost; a cloud model in this process keeps the
 * prefix in its cache instead and reads only the branch (each branch from a checkpoint, then rolled back).
 */
class BranchScorer {
  private sequence: DecoderSequence | undefined;
  /** The cloud's logits after the prefix: its prediction of a branch's first id. */
  private last: Float32Array | undefined;
  private readonly prefix: number[] = [];

  constructor(private readonly scorer: CloudScorer) {}

  async extend(ids: readonly number[]): Promise<void> {
    this.prefix.push(...ids);
    const model = this.model;
    // Past the window the prefix is scored by its last window's worth, as scoredNll reads it.
    if (!model || this.prefix.length >= model.pack.maxPositions) return this.dispose();
    this.sequence ??= model.newSequence();
    this.last = (await this.sequence.append(ids)).logits;
  }

  async nll(branch: readonly number[]): Promise<number> {
    const { sequence, last } = this;
    if (!sequence || !last || sequence.length + branch.length > this.model!.pack.maxPositions) return scoredNll(this.scorer, this.prefix, branch);
    // Branch id k is predicted by the prefix's last logits (k = 0) or by the branch's id k - 1.
    sequence.checkpoint();
    try {
      const out = branch.length > 1 ? await sequence.append(branch.slice(0, -1), { allPositions: true }) : undefined;
      const vocab = last.length;
      const row = (k: number) => (k === 0 ? last : out!.allLogits!.subarray((k - 1) * vocab, k * vocab));
      let nll = 0;
      for (let k = 0; k < branch.length; k++) nll += logSumExp(row(k)) - row(k)[branch[k]!]!;
      return nll;
    } finally {
      sequence.rollback();
    }
  }

  private get model() {
    return this.scorer instanceof InProcessScorer ? this.scorer.model : undefined;
  }

  dispose(): void {
    this.sequence?.dispose();
    this.sequence = undefined;
    this.last = undefined;
  }
}

/** Per choice: what a route gains over the horizon, and how many ids of each branch take a loop one step further. */
export interface HorizonReading {
  /**
   * NLL(kept branch) − NLL(routed branch): positive where the route leaves the cloud likelier text over the
   * horizon, negative where it leaves it less likely; 0 where the two top-1s are the same token.
   */
  gains: Float32Array;
  /** Ids of the kept (routed) branch that complete a 4-gram seen earlier in the trajectory or the branch. */
  keptRepeats: Uint8Array;
  routedRepeats: Uint8Array;
}

/** Ids of `branch` that complete a 4-gram already in `prefix` and the branch before them. */
function repeatsIn(prefix: readonly number[], branch: readonly number[]): number {
  const all = [...prefix, ...branch];
  let repeats = 0;
  for (let k = 0; k < branch.length; k++) if (repeatsFourGramAt(all, prefix.length + k - 1, branch[k]!)) repeats++;
  return repeats;
}

/**
 * The reading with each loop step charged `cost` nats: g + cost · (kept repeats − routed repeats). The ids that
 * take a loop a step further are the ones the cloud finds likeliest, so its NLL counts them as gains; the
 * free-running rep4 counts them as the loop they are. 0 leaves the reading as it is.
 */
export function chargeLoopSteps(reading: HorizonReading, cost: number): HorizonReading {
  if (cost === 0) return reading;
  const gains = reading.gains.map((g, j) => g + cost * (reading.keptRepeats[j]! - reading.routedRepeats[j]!));
  return { ...reading, gains };
}

/**
 * The middle size of what a route gains or loses over the horizon, |g|, over the choices where the two top-1s
 * differ (g is nothing elsewhere, by definition): the scale of a pair's gains, which the default loop cost is a
 * share of. Zero when they never differ.
 */
export function medianRouteGain({ gains }: HorizonReading): number {
  return median(Array.from(gains, Math.abs).filter((g) => g > 0));
}

/** The horizon readings of a list of sequences' choices, one after the other. */
export function concatHorizon(parts: readonly HorizonReading[]): HorizonReading {
  const count = parts.reduce((s, p) => s + p.gains.length, 0);
  const out: HorizonReading = { gains: new Float32Array(count), keptRepeats: new Uint8Array(count), routedRepeats: new Uint8Array(count) };
  let at = 0;
  for (const p of parts) {
    out.gains.set(p.gains, at);
    out.keptRepeats.set(p.keptRepeats, at);
    out.routedRepeats.set(p.routedRepeats, at);
    at += p.gains.length;
  }
  return out;
}

export async function horizonGains(o: HorizonOptions): Promise<HorizonReading> {
  const count = o.choices.length;
  const reading: HorizonReading = { gains: new Float32Array(count), keptRepeats: new Uint8Array(count), routedRepeats: new Uint8Array(count) };
  const differs = o.choices.some((c) => c.proposed !== c.cloudTop);
  if (!differs) return reading;
  // Top-1 over the ids both models have (exports pad their vocabularies differently), as ForcedRecords takes it.
  const shared = Math.min(o.edgeModel.pack.vocabSize, o.scorer.vocabSize ?? o.edgeModel.pack.vocabSize);
  const sequence = o.edgeModel.newSequence();
  const cloud = new BranchScorer(o.scorer);
  try {
    await sequence.append(o.ids.slice(0, o.first + 1));
    await cloud.extend(o.ids.slice(0, o.first + 1));
    for (const [j, choice] of o.choices.entries()) {
      const position = o.first + j;
      if (j > 0) {
        await sequence.append([o.ids[position]!]);
        await cloud.extend([o.ids[position]!]);
      }
      if (choice.proposed === choice.cloudTop) continue;
      // A branch that would not fit the edge's window is cut to what fits (at least the choice itself).
      const room = Math.max(0, Math.min(o.tokens, o.edgeModel.pack.maxPositions - (position + 2)));
      const branch = async (token: number) => {
        sequence.checkpoint();
        try {
          const written = [token];
          if (o.stopIds.has(token)) return written;
          let out = await sequence.append([token]);
          while (written.length <= room) {
            const next = argmax(out.logits.subarray(0, shared));
            written.push(next);
            if (o.stopIds.has(next)) break;
            if (written.length <= room) out = await sequence.append([next]);
          }
          return written;
        } finally {
          sequence.rollback();
        }
      };
      const prefix = o.ids.slice(0, position + 1);
      const kept = await branch(choice.proposed);
      const routed = await branch(choice.cloudTop);
      const length = Math.max(kept.length, routed.length);
      reading.gains[j] = length * ((await cloud.nll(kept)) / kept.length - (await cloud.nll(routed)) / routed.length);
      reading.keptRepeats[j] = repeatsIn(prefix, kept);
      reading.routedRepeats[j] = repeatsIn(prefix, routed);
    }
  } finally {
    sequence.dispose();
    cloud.dispose();
  }
  return reading;
}
