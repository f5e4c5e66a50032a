/**
 * Two decoders timed in alternating rounds (ours round 1, the peer's round 1, ours round 2, ...), the same
 * steps per round for both, so that a shared machine whose speed moves within a minute slows both
 * alike. Each round's ratio compares two figures taken seconds apart; their median is the comparison the
 * machine's noise moves least. The ratio of the two medians over all steps is kept too.
 *
 * @example
 * const a = await alternateRounds(ours, peer, { steps: 32, rounds: 4, warmup: 4 });
 * a.ratio;              // median of ours' steps / median of the peer's
 * a.ratioByRound.median; // median over the rounds of (ours' round median / the peer's)
 */
import { AppError } from '../../shared/errors.ts';
import { median, percentile } from '../../shared/statistics.ts';

/** One decoder, loaded, prefilled and waiting: it decodes `steps` more tokens when asked. */
export interface RoundSide {
  /** Decodes `steps` tokens untimed. */
  warmUp(steps: number): Promise<void>;
  /** Decodes `steps` tokens and returns each one's milliseconds. */
  runRound(steps: number): Promise<number[]>;
}

export interface AlternationOptions {
  /** Measured steps in all, split over the rounds as evenly as whole steps allow. */
  steps: number;
  rounds: number;
  /** Untimed steps each side decodes right before its first round. */
  warmup: number;
}

export interface SideFigures {
  /** Median over every measured step of every round. */
  msPerToken: number;
  msPerTokenP90: number;
  /** The fastest step: the machine's quietest moment. */
  minMsPerToken: number;
  /** Each round's median. */
  roundMsPerToken: number[];
}

export interface Alternation {
  ours: SideFigures;
  peer: SideFigures;
  /** ours.msPerToken / peer.msPerToken. */
  ratio: number;
  /** Per round ours / peer (round medians): their median, min and max. */
  ratioByRound: { median: number; min: number; max: number };
  roundRatios: number[];
}

/** How many of `steps` each of `rounds` rounds decodes: the counts differ by at most one and add up to `steps`. */
export function roundStepCounts(steps: number, rounds: number): number[] {
  return Array.from({ length: rounds }, (_, r) => Math.floor(((r + 1) * steps) / rounds) - Math.floor((r * steps) / rounds));
}

export async function alternateRounds(ours: RoundSide, peer: RoundSide, o: AlternationOptions): Promise<Alternation> {
  if (!(o.rounds >= 1 && o.steps >= o.rounds && o.warmup >= 0))
    throw new AppError('INVALID_ARGUMENT', `alternating rounds need 1 ≤ rounds ≤ steps and warmup ≥ 0, got ${JSON.stringify(o)}`);
  const oursRounds: number[][] = [];
  const peerRounds: number[][] = [];
  // Sequential awaits: only one side decodes at a time, the other sits idle and loaded.
  for (const [r, count] of roundStepCounts(o.steps, o.rounds).entries()) {
    if (r === 0 && o.warmup > 0) await ours.warmUp(o.warmup);
    oursRounds.push(await ours.runRound(count));
    if (r === 0 && o.warmup > 0) await peer.warmUp(o.warmup);
    peerRounds.push(await peer.runRound(count));
  }
  return summarizeRounds(oursRounds, peerRounds);
}

/** The figures of rounds already run: `oursRounds[r]` and `peerRounds[r]` are round r's step times. */
export function summarizeRounds(oursRounds: readonly (readonly number[])[], peerRounds: readonly (readonly number[])[]): Alternation {
  if (oursRounds.length === 0 || oursRounds.length !== peerRounds.length || [...oursRounds, ...peerRounds].some((r) => r.length === 0)) {
    throw new AppError('INVALID_ARGUMENT', 'each side needs the same number of rounds, none of them empty');
  }
  const ours = sideFigures(oursRounds);
  const peer = sideFigures(peerRounds);
  const roundRatios = ours.roundMsPerToken.map((ms, r) => ms / peer.roundMsPerToken[r]!);
  return {
    ours,
    peer,
    ratio: ours.msPerToken / peer.msPerToken,
    ratioByRound: { median: median(roundRatios), min: Math.min(...roundRatios), max: Math.max(...roundRatios) },
    roundRatios,
  };
}

function sideFigures(rounds: readonly (readonly number[])[]): SideFigures {
  const steps = rounds.flat();
  return { msPerToken: median(steps), msPerTokenP90: percentile(steps, 90), minMsPerToken: Math.min(...steps), roundMsPerToken: rounds.map((r) => median(r)) };
}
