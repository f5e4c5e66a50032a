/**
 * Decoding ahead, the inner loop of speculation: while a routed step is on the network, the edge goes on
 * decoding from its own top-1 guess for the routed position, scoring each speculative position with the
 * router as usual. Whether the steps are kept or thrown away is decided by the chain that called it
 * (speculation-chains.ts) once the reply is in; nothing here emits tokens. A speculative position that
 * routes may be sent at once as a conditional step (`branch`), the edge going on from its guess there too.
 */
import type { AppendResult } from '../../../shared/model/decoder-model.ts';
import { eventLoopTurn } from '../../../shared/process/event-loop-turn.ts';

/** One speculative position after the routed one: what the edge computed there, before knowing the reply. */
export interface SpeculativeStep {
  /** Outputs after feeding the previous token: the logits and hidden state of this position. */
  result: AppendResult;
  slmMs: number;
  /** Absent when the reply came before the router saw this position. */
  score?: number;
  routerMs: number;
  /** Whether the position routes, decided when it was scored (absent when the reply came first). */
  routed?: boolean;
  /** The edge's token here; absent when the position routes (nested routing) or the reply came first. */
  token?: number;
  pickMs: number;
}

export interface SpeculationHooks {
  /** Appends one token to the edge's sequence; returns the new last position's outputs. */
  feed(token: number): Promise<{ result: AppendResult; ms: number }>;
  /** The router's score of a position (the loop's one router call). */
  score(result: AppendResult): Promise<{ score: number; ms: number }>;
  /** Decides whether a speculative position routes (and records it, as the loop records a decided one). */
  routes(score: number): boolean;
  /** The token the edge picks at a position it keeps (draws from the loop's random stream). */
  pick(result: AppendResult): number;
  isEos(token: number): boolean;
  /** True once the cloud's reply (or its failure) is in. */
  replied(): boolean;
  /**
   * A speculative position routed: sends its step as a conditional one and returns the edge's guess there to
   * decode on from, or undefined to stop (conditional steps off, one already in flight, the guess ends).
   */
  branch?(step: SpeculativeStep): number | undefined;
}

/**
 * Decodes ahead from `guess` until the reply is in, `maxSteps` steps are held, a speculative position
 * routes and `branch` does not go on past it, or the edge picks an end token. `steps` may hold a chain
 * decoded earlier that `guess` continues (they count towards `maxSteps`).
 *
 * @example
 * const steps = await decodeAhead(argmax(last.logits), 16, hooks);
 * // steps[0].result holds the logits after the guess; steps.length speculative forward passes were run
 */
export async function decodeAhead(guess: number, maxSteps: number, hooks: SpeculationHooks, steps: SpeculativeStep[] = []): Promise<SpeculativeStep[]> {
  let token = guess;
  while (steps.length < maxSteps && !hooks.replied()) {
    const { result, ms } = await hooks.feed(token);
    const step: SpeculativeStep = { result, slmMs: ms, routerMs: 0, pickMs: 0 };
    steps.push(step);
    // The reply may have come in during that pass: read it before starting another (event-loop-turn.ts).
    await eventLoopTurn();
    if (hooks.replied()) break;
    const scored = await hooks.score(result);
    step.score = scored.score;
    step.routerMs = scored.ms;
    step.routed = hooks.routes(scored.score);
    if (step.routed) {
      const next = hooks.branch?.(step);
      if (next === undefined) break;
      token = next;
      continue;
    }
    const t = performance.now();
    token = hooks.pick(result);
    step.token = token;
    step.pickMs = performance.now() - t;
    if (hooks.isEos(token)) break;
  }
  return steps;
}
