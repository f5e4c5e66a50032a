/**
 * Speculation as the decoding loop sees it: one object the loop calls at four points of a step, so the
 * plain path reads without it. While a routed step is on the network the edge decodes ahead from its own
 * guess; the reply keeps that work (the guess was right) or throws it away (the cache rolled back, the
 * random stream rewound), so the emitted tokens are exactly those of the loop without speculation. The
 * real one is SpeculationChains (speculation-chains.ts, with its conditional steps, and `speculationFor`,
 * which picks); `NO_SPECULATION` is what a request that does not speculate gets.
 */
import type { CloudStepRequest } from '../../cloud/cloud-client.ts';
import type { CloudReply, StepSender } from '../cloud-reply.ts';
import type { SpeculativeStep } from './decode-ahead.ts';

/** A position the edge decoded ahead and kept: its forward pass, router score and pick are done. */
export interface KeptPosition {
  step: SpeculativeStep;
  /** Router and sampling time spent on it while waiting (edge time of the step it becomes). */
  replayMs: number;
  /** The token picked there is already in the edge's cache (a later kept position followed it). */
  fed: boolean;
}

/** What settling a routed step's speculation leaves the loop with. */
export interface Settled {
  /** The tokens to emit: the reply's, or with greedy decoding the guess when the step failed. */
  chosen: number[] | undefined;
  /** The chosen token is already in the edge's cache (the chain decoded ahead from it was kept). */
  fed: boolean;
}

export interface Speculation {
  /** Start of a step: the next kept position, made the one being decided (the edge's `last`), or undefined. */
  replayKept(): KeptPosition | undefined;
  /** A routed position: sends its step with `send`, or takes the one already in flight for it (a conditional step). */
  send(request: CloudStepRequest, send: StepSender): Promise<{ reply: Promise<CloudReply> }>;
  /** While `reply` is on the network: decodes ahead (rejects only when the edge model fails). */
  decodeAhead(reply: Promise<CloudReply>): Promise<void>;
  /**
   * Once the reply is in: keeps or throws away what was decoded ahead (the edge then back at the routed
   * position); undefined if nothing was. `chosen`: the reply's tokens, undefined when it gave none.
   */
  settle(chosen: number[] | undefined): Settled | undefined;
}

/** Sends each routed step when the loop reaches it and decodes nothing ahead. */
export const NO_SPECULATION: Speculation = {
  replayKept: () => undefined,
  send: async (request, send) => ({ reply: send(request) }),
  decodeAhead: async () => {},
  settle: () => undefined,
};
