/**
 * Speculation with conditional steps. At a routed position the edge decodes past it from its guess while
 * the step is out (a chain); a position of that chain that routes too is sent at once as a conditional
 * step, which assumes the guess, and the edge decodes on past it as well (the chain behind). The first
 * reply then settles both: a wrong guess throws the whole chain away (the conditional step comes back
 * skipped); a right one keeps the chain, which the loop replays as its decisions up to the second routed
 * position, where it takes the conditional step already in flight instead of sending one. A conditional
 * step that failed or came back skipped there is sent again as a plain step, so the cloud is asked at
 * every routed position exactly as without speculation.
 */
import type { AppendResult } from '../../../shared/model/decoder-model.ts';
import { AppError } from '../../../shared/errors.ts';
import type { TokenSource } from '../../../shared/contract/contract-vocabulary.ts';
import { refusesSteps, type CloudStepRequest } from '../../cloud/cloud-client.ts';
import type { CloudReply, StepSender } from '../cloud-reply.ts';
import { decodeAhead, type SpeculativeStep } from './decode-ahead.ts';
import { DEFAULT_SPECULATION_DEPTH, type SpeculationSettings } from '../edge-engine.ts';
import { elapsed } from '../generation-edge.ts';
import type { GenerationState } from '../generation-state.ts';
import type { RoutingCut } from '../../routing/routing-cut.ts';
import type { Chain, HeldData, SpeculationHeld } from './speculation-held.ts';
import { NO_SPECULATION, type KeptPosition, type Settled, type Speculation } from './speculation.ts';
import { SpeculationPolicy } from './speculation-policy.ts';
import { enterSpeculationPhase, INITIAL_SPECULATION_PHASE, type SpeculationEvent, type SpeculationPhase } from './speculation-states.ts';

/**
 * The speculation of one generation (see speculation.ts for how the loop calls it). Every routed step
 * feeds `policy` its round trip and whether the edge's guess was right; with `auto` the policy decides at
 * each routed position whether a chain is opened there at all. Where it stands is one SpeculationHeld,
 * changed only through the transition table (speculation-states.ts).
 *
 * @example
 * const speculation = new SpeculationChains(state, { depth: 8 }, new SpeculationPolicy(), false);
 */
export class SpeculationChains implements Speculation {
  private held: SpeculationHeld = { phase: INITIAL_SPECULATION_PHASE } as SpeculationHeld;
  private readonly depth: number;

  constructor(
    private readonly state: GenerationState,
    private readonly settings: SpeculationSettings,
    private readonly policy: SpeculationPolicy,
    private readonly auto: boolean,
  ) {
    this.depth = settings.depth ?? DEFAULT_SPECULATION_DEPTH;
  }

  /** Where speculation stands (speculation-states.ts). */
  get phase(): SpeculationPhase {
    return this.held.phase;
  }

  replayKept(): KeptPosition | undefined {
    const held = this.held;
    if (held.phase !== 'replaying' && held.phase !== 'replaying-to-step') return undefined;
    const step = held.kept.shift()!;
    const more = held.kept.length > 0;
    if (more) this.enter('replay', held.phase, held);
    else if (held.phase === 'replaying') this.enter('replay-last', 'idle', {});
    else this.enter('replay-last', 'resuming', { pending: held.pending });
    // Its forward pass and pick were done while waiting: its outputs are the ones decided now.
    const { metrics, edge } = this.state;
    edge.decideKeptPosition(step.result, step.slmMs);
    const replayMs = step.routerMs + step.pickMs;
    metrics.savedMs += step.slmMs + replayMs;
    metrics.slmMs += step.slmMs;
    return { step, replayMs, fed: more };
  }

  async send(request: CloudStepRequest, send: StepSender): Promise<{ reply: Promise<CloudReply> }> {
    const held = this.held;
    if (held.phase !== 'resuming') {
      if (held.phase === 'draining') await held.drain;
      this.enter('send', 'sent', {});
      const sentAt = performance.now();
      const reply = send(request);
      void reply.then((answer) => {
        if (answer.kind !== 'failed' && answer.kind !== 'cancelled') this.policy.observeRoundTrip(elapsed(sentAt));
      });
      return { reply };
    }
    // This position's conditional step went out while the previous one was in flight. Skipped or failed
    // (its predecessor failed, and the stream with it), it is sent again now as a plain step, once every
    // step sent behind it is answered: the cloud is asked here exactly as without speculation.
    const resumed = held.pending;
    this.enter('send', 'ahead', { chain: resumed });
    const resend = async () => {
      await resumed.behind?.chain.step;
      return send(request);
    };
    const reply = resumed.step.then((answer) => (answer.kind === 'skipped' || answer.kind === 'failed' ? resend() : answer));
    return { reply };
  }

  async decodeAhead(reply: Promise<CloudReply>): Promise<void> {
    const { state } = this;
    const ahead = Math.min(this.depth, state.room - 1);
    if (ahead <= 0 || refusesSteps(state.engine.cloud?.state())) return;
    let held = this.held;
    if (held.phase === 'sent') {
      if (this.auto && !this.pays()) return;
      const chain = this.open(reply, state.edge.last!, state.metrics.tokens, [...state.context], [...state.sources], state.cut.fork());
      this.enter('open', 'ahead', { chain });
      held = this.held;
    }
    if (held.phase === 'ahead') await this.extend(held.chain, ahead);
  }

  settle(chosen: number[] | undefined): Settled | undefined {
    const held = this.held;
    const chain = held.phase === 'ahead' ? held.chain : undefined;
    // Without a chain nothing was fed since the routed position: `last` is still its outputs.
    const guess = chain?.guess ?? this.state.edge.guess(this.state.edge.last!);
    if (chosen) this.policy.observeGuess(chosen.length === 1 && chosen[0] === guess);
    if (!chain) {
      this.enter('settle', 'idle', {});
      return undefined;
    }
    // A failed step falls back to the edge's own pick: with greedy decoding that is the guess itself.
    if (!chosen && this.state.request.temperature === 0) chosen = [chain.guess];
    return { chosen, fed: this.resolve(chain, chosen) };
  }

  /** The one way the phase changes: `event` must lead to `phase` in the table, which holds `data`. */
  private enter<P extends SpeculationPhase>(event: SpeculationEvent, phase: P, data: HeldData<P>): void {
    const next = enterSpeculationPhase(this.held.phase, event);
    if (next !== phase) throw new AppError('INTERNAL', `speculation: ${event} leads to ${next}, not ${phase}`);
    this.held = { ...data, phase } as SpeculationHeld;
  }

  /** `auto` at a routed position: the policy's decision from the figures so far, recorded in the metrics. */
  private pays(): boolean {
    const { metrics } = this.state;
    if (metrics.lastStepMs !== undefined) this.policy.observeStep(metrics.lastStepMs);
    const { speculate, figures } = this.policy.decide(this.depth);
    metrics.speculationFigures = figures;
    if (speculate) metrics.speculationDecisions.ahead++;
    else metrics.speculationDecisions.waited++;
    return speculate;
  }

  /** Starts a chain from the edge's top-1 guess at the routed position whose step is `step`; the edge can return here. */
  private open(step: Promise<CloudReply>, from: AppendResult, tokenIndex: number, ids: number[], idSources: TokenSource[], cut: RoutingCut): Chain {
    const { edge } = this.state;
    const guess = edge.guess(from);
    const draws = edge.markAhead();
    const chain: Chain = { step, tokenIndex, guess, from, draws, steps: [], ids, idSources, replied: false, cut };
    void step.then(() => (chain.replied = true));
    return chain;
  }
  /**
   * Sends the step of a routed position inside `chain` (the last of its steps) as a conditional step, and
   * returns the guess to decode on from; undefined when it may not (or the guess ends the text).
   */
  private branch(chain: Chain, at: SpeculativeStep): number | undefined {
    const { state } = this;
    if (this.settings.conditionalSteps === false || chain.behind || chain.replied || !state.cloud.isOpen) return undefined;
    if (refusesSteps(state.engine.cloud?.state())) return undefined;
    const index = chain.steps.length - 1;
    const tokenIndex = chain.tokenIndex + 1 + index;
    const request = state.stepRequest([...chain.ids], [...chain.idSources], { tokenIndex, maxTokens: 1, score: at.score ?? 0, hidden: at.result.hidden });
    const step = state.sendStep({ ...request, conditional: true });
    state.metrics.conditionalSteps++;
    const behind = this.open(step, at.result, tokenIndex, chain.ids, chain.idSources, chain.cut);
    chain.behind = { index, chain: behind };
    return state.eos.has(behind.guess) ? undefined : behind.guess;
  }

  /** Decodes ahead at the end of `chain` until its step settles (or the bound). */
  private async extend(chain: Chain, ahead: number): Promise<void> {
    const { state } = this;
    const tail = chain.steps.at(-1);
    let token: number | undefined;
    if (!tail) token = chain.guess;
    else if (tail.token !== undefined) token = state.eos.has(tail.token) ? undefined : tail.token;
    // The chain ended at a routed position while another step was in flight: its step can go out now.
    else if (tail.routed) token = this.branch(chain, tail);
    if (token === undefined || chain.replied) return;
    // The next token fed is a guess for a routed position (source `llm` in the context a conditional step
    // sends, as it will be if the guess holds) rather than the edge's pick.
    let guessing = !tail || tail.token === undefined;
    await decodeAhead(
      token,
      ahead,
      {
        feed: async (token) => {
          const fed = await state.edge.feedAhead(token);
          chain.ids.push(token);
          chain.idSources.push(guessing ? 'llm' : 'slm');
          guessing = false;
          return fed;
        },
        score: (result) => state.score(result, chain.ids),
        routes: (score) => {
          const decision = chain.cut.decide(score);
          chain.cut.record(score, decision.routed, decision);
          return decision.routed;
        },
        pick: (result) => state.edge.pick(result),
        isEos: (token) => state.eos.has(token),
        replied: () => chain.replied,
        branch: (step) => {
          const guess = this.branch(chain, step);
          guessing = guess !== undefined;
          return guess;
        },
      },
      chain.steps,
    );
  }

  /**
   * Keeps the chain's steps when the step's tokens are exactly the guess; otherwise returns the edge to the
   * routed position (its cache, the random stream, the outputs the loop continues from). True when the
   * chosen token is already in the cache. A kept chain with a conditional step behind it is kept up to that
   * step's position, where the loop takes the step in flight instead of sending one.
   */
  private resolve(chain: Chain, chosen: number[] | undefined): boolean {
    const { metrics, edge } = this.state;
    const { steps, behind } = chain;
    if (steps.length > 0) metrics.speculated++;
    if (steps.length > 0 && chosen?.length === 1 && chosen[0] === chain.guess) {
      metrics.speculationHits++;
      edge.keepAhead();
      if (!behind) {
        this.enter('keep', 'replaying', { kept: steps });
        return true;
      }
      behind.chain.steps = steps.slice(behind.index + 1);
      this.enter('keep-to-step', 'replaying-to-step', { kept: steps.slice(0, behind.index + 1), pending: behind.chain });
      return true;
    }
    edge.returnTo(chain.from, chain.draws);
    metrics.wastedSteps += steps.length;
    for (const step of steps) metrics.wastedMs += step.slmMs + step.routerMs + step.pickMs;
    if (!behind) {
      this.enter('discard', 'idle', {});
      return false;
    }
    // Its assumed token was wrong: the cloud skips it. Its reply comes before any later step's.
    metrics.conditionalSkipped++;
    this.enter('discard-step', 'draining', { drain: behind.chain.step.then(() => {}) });
    return false;
  }
}

/**
 * The speculation a generation runs with. Only single-token joint steps are speculated past: a span is fed
 * to the edge's cache as one forward pass, whose logits may differ in the last bits from feeding its tokens
 * one by one, so decoding ahead past it could not reproduce the loop without speculation exactly. With
 * `auto`, the engine's policy (made here on first use, then kept across generations) decides at each
 * routed position; forced on, its figures are still fed.
 *
 * @example
 * const speculation = speculationFor(state); // NO_SPECULATION unless the request speculates
 */
export function speculationFor(state: GenerationState): Speculation {
  const { request, engine } = state;
  state.metrics.speculateSetting = request.speculate === 'auto' ? 'auto' : request.speculate ? 'on' : 'off';
  // A constrained generation does not decode ahead: its guesses would have to follow the grammar's matcher too.
  if (!request.speculate || request.mode !== 'joint' || request.routeSpan !== 1 || request.constraint) return NO_SPECULATION;
  // The box's policy (the runtime makes it at start), or one of this generation's own for an engine without one.
  const settings = engine.speculation ?? {};
  return new SpeculationChains(state, settings, settings.policy ?? new SpeculationPolicy(), request.speculate === 'auto');
}
