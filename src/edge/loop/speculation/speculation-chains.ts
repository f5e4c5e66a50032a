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
import { isAbortError } from '../../../shared/errors.ts';
import type { TokenSource } from '../../../shared/contract/contract-vocabulary.ts';
import { refusesSteps, type CloudConversation, type CloudStepReply, type CloudStepRequest } from '../../cloud/cloud-client.ts';
import { decodeAhead, type SpeculativeStep } from './decode-ahead.ts';
import { DEFAULT_SPECULATION_DEPTH, type SpeculationSettings } from '../edge-engine.ts';
import { elapsed, type GenerationState } from '../generation-state.ts';
import type { RoutingCut } from '../../routing/routing-cut.ts';
import { NO_SPECULATION, type KeptPosition, type Settled, type Speculation } from './speculation.ts';
import { SpeculationPolicy } from './speculation-policy.ts';

/**
 * A routed position whose step is in flight, and what the edge decoded past it from its guess. When a
 * position of the chain routed too, its conditional step went out at once: `behind` holds it, with the
 * chain's part after it. Each chain holds one checkpoint of the edge's cache, at its routed position.
 */
interface Chain {
  step: Promise<CloudStepReply>;
  /** Token index of the routed position. */
  tokenIndex: number;
  guess: number;
  from: AppendResult;
  draws: number;
  steps: SpeculativeStep[];
  /** The context up to the end of the chain (shared with the chain behind, which continues it). */
  ids: number[];
  /** The sources of `ids` as the steps sent from inside the chain give them: its routed positions' tokens as `llm`. */
  idSources: TokenSource[];
  behind?: { index: number; chain: Chain };
  replied: boolean;
  /**
   * The generation's cut as it will stand at the chain's end: a fork taken at the routed position, fed every
   * position decoded ahead, so each is decided as the loop would decide it. The chain behind continues it.
   */
  cut: RoutingCut;
}

/**
 * The speculation of one generation (see speculation.ts for how the loop calls it). Every routed step
 * feeds `policy` its round trip and whether the edge's guess was right; with `auto` the policy decides at
 * each routed position whether a chain is opened there at all.
 *
 * @example
 * const speculation = new SpeculationChains(state, { depth: 8 }, new SpeculationPolicy(), false);
 */
export class SpeculationChains implements Speculation {
  /** Positions already decoded ahead and kept: replayed as the loop's decisions. */
  private kept: SpeculativeStep[] = [];
  /** The chain of the conditional step sent at the last kept position: that position's step is in flight. */
  private pending: Chain | undefined;
  /** A conditional step whose assumption failed: its (skipped) reply must be in before the next step is sent. */
  private drain: Promise<void> | undefined;
  /** The chain of the routed position being decided. */
  private current: Chain | undefined;
  private readonly depth: number;

  constructor(
    private readonly state: GenerationState,
    private readonly settings: SpeculationSettings,
    private readonly policy: SpeculationPolicy,
    private readonly auto: boolean,
  ) {
    this.depth = settings.depth ?? DEFAULT_SPECULATION_DEPTH;
  }

  replayKept(): KeptPosition | undefined {
    const step = this.kept.shift();
    if (!step) return undefined;
    const { metrics } = this.state;
    const replayMs = step.routerMs + step.pickMs;
    metrics.savedMs += step.slmMs + replayMs;
    metrics.slmMs += step.slmMs;
    return { step, replayMs, fed: this.kept.length > 0 };
  }

  async send(conversation: CloudConversation, request: CloudStepRequest): Promise<{ reply: Promise<CloudStepReply> }> {
    const resumed = this.pending;
    this.pending = undefined;
    this.current = resumed;
    if (!resumed) {
      if (this.drain) await this.drain;
      this.drain = undefined;
      const sentAt = performance.now();
      const reply = conversation.next(request);
      reply.then(
        () => this.policy.observeRoundTrip(elapsed(sentAt)),
        () => {},
      );
      return { reply };
    }
    // This position's conditional step went out while the previous one was in flight. Skipped or failed
    // (its predecessor failed, and the stream with it), it is sent again now as a plain step, once every
    // step sent behind it is answered: the cloud is asked here exactly as without speculation.
    const resend = async () => {
      await resumed.behind?.chain.step.catch(() => {});
      return conversation.next(request);
    };
    const reply = resumed.step.then(
      (answer) => (answer.skipped ? resend() : answer),
      (e: unknown) => {
        if (this.state.signal?.aborted || isAbortError(e)) throw e;
        return resend();
      },
    );
    return { reply };
  }

  async decodeAhead(reply: Promise<CloudStepReply>): Promise<void> {
    const { state } = this;
    const ahead = Math.min(this.depth, state.room - 1);
    if (ahead <= 0 || refusesSteps(state.engine.cloud?.state())) return;
    if (!this.current) {
      if (this.auto && !this.pays()) return;
      this.current = this.open(reply, state.last!, state.metrics.tokens, [...state.context], [...state.sources], state.cut.fork());
    }
    await this.extend(this.current, ahead);
  }

  settle(chosen: number[] | undefined): Settled | undefined {
    const chain = this.current;
    this.current = undefined;
    // Without a chain nothing was fed since the routed position: `last` is still its outputs.
    const guess = chain?.guess ?? this.state.guess(this.state.last!);
    if (chosen) this.policy.observeGuess(chosen.length === 1 && chosen[0] === guess);
    if (!chain) return undefined;
    // A failed step falls back to the edge's own pick: with greedy decoding that is the guess itself.
    if (!chosen && this.state.request.temperature === 0) chosen = [chain.guess];
    return { chosen, ...this.resolve(chain, chosen) };
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

  /** Starts a chain from the edge's top-1 guess at the routed position whose step is `step`; the cache can return here. */
  private open(step: Promise<CloudStepReply>, from: AppendResult, tokenIndex: number, ids: number[], idSources: TokenSource[], cut: RoutingCut): Chain {
    const { random, sequence } = this.state;
    const guess = this.state.guess(from);
    const chain: Chain = { step, tokenIndex, guess, from, draws: random.draws, steps: [], ids, idSources, replied: false, cut };
    // Handled here so a failure during speculation is not an unhandled rejection; the loop awaits `step` itself.
    step.then(
      () => (chain.replied = true),
      () => (chain.replied = true),
    );
    sequence!.checkpoint();
    return chain;
  }

  /**
   * Sends the step of a routed position inside `chain` (the last of its steps) as a conditional step, and
   * returns the guess to decode on from; undefined when it may not (or the guess ends the text).
   */
  private branch(chain: Chain, at: SpeculativeStep): number | undefined {
    const { state } = this;
    if (this.settings.conditionalSteps === false || chain.behind || chain.replied || !state.conversation) return undefined;
    if (refusesSteps(state.engine.cloud?.state())) return undefined;
    const index = chain.steps.length - 1;
    const tokenIndex = chain.tokenIndex + 1 + index;
    const request = state.stepRequest([...chain.ids], [...chain.idSources], { tokenIndex, maxTokens: 1, score: at.score ?? 0, hidden: at.result.hidden });
    const step = state.conversation.next({ ...request, conditional: true });
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
          const t = performance.now();
          const result = await state.sequence!.append([token]);
          state.metrics.decodePass(result.batchSize);
          chain.ids.push(token);
          chain.idSources.push(guessing ? 'llm' : 'slm');
          guessing = false;
          return { result, ms: elapsed(t) };
        },
        score: (result) => state.score(result, chain.ids),
        routes: (score) => {
          const decision = chain.cut.decide(score);
          chain.cut.record(score, decision.routed, decision);
          return decision.routed;
        },
        pick: (result) => state.pick(result),
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
   * Keeps the chain's steps when the step's tokens are exactly the guess; otherwise returns the cache to
   * the routed position and rewinds the random stream. `fed` when the chosen token is already in the cache;
   * `last`, after a rollback, the outputs the loop continues from (the routed position's).
   * A kept chain with a conditional step behind it is kept up to that step's position, where the loop takes
   * the step in flight (`pending`) instead of sending one.
   */
  private resolve(chain: Chain, chosen: number[] | undefined): Pick<Settled, 'fed' | 'last'> {
    const { state } = this;
    const { metrics, sequence } = state;
    const { steps, behind } = chain;
    if (steps.length > 0) metrics.speculated++;
    if (steps.length > 0 && chosen?.length === 1 && chosen[0] === chain.guess) {
      metrics.speculationHits++;
      sequence!.commit();
      this.kept = behind ? steps.slice(0, behind.index + 1) : steps;
      if (behind) {
        behind.chain.steps = steps.slice(behind.index + 1);
        this.pending = behind.chain;
      }
      return { fed: true };
    }
    sequence!.rollback();
    state.random.rewind(chain.draws);
    metrics.wastedSteps += steps.length;
    for (const step of steps) metrics.wastedMs += step.slmMs + step.routerMs + step.pickMs;
    if (behind) {
      // Its assumed token was wrong: the cloud skips it. Its reply comes before any later step's.
      metrics.conditionalSkipped++;
      this.drain = behind.chain.step.then(
        () => {},
        () => {},
      );
    }
    return { fed: false, last: chain.from };
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
