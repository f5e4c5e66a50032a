/**
 * A cloud conversation that never lets a private value leave: every step's context goes through the
 * generation's Pseudonymiser before the conversation underneath (gRPC, in-process) sees it, and the
 * cloud's tokens come back through it. What the shim holds is the pseudonymised sequence, and only that:
 * its KV cache grows with it step after step, as without privacy.
 *
 * - A context that ends where a value may be under way is not sent: the reply is `withheld`, and the edge
 *   decides the position (it is the one copying the value).
 * - The cloud may write a placeholder over several tokens. While what it wrote ends inside one (`[EM`),
 *   the conversation asks it for one more token, then restores the whole placeholder at once; the loop
 *   gets the value's tokens, all of them where the generation has room (`room`), past the step's span: a
 *   value cut short would end the context inside a value, and the edge model would write the rest.
 * - A conditional step waits for the step it assumes, then goes out as a plain step if that step's reply
 *   is what it assumed, and comes back skipped otherwise: its context may hold a value the cloud's reply
 *   completes, which only the reply can tell.
 * - When the cloud context of a step does not extend what the shim holds (the cloud wrote a value's text
 *   on its own, and the edge now sends its placeholder), the conversation underneath is replaced by a new
 *   one, which opens its stream with the whole pseudonymised context.
 * - Hidden states are never sent: they are computed from the real text.
 *
 * @example
 * const conversation = openConversation(cloud, { requestId, disclosure }, pseudonymiser);
 * const reply = await conversation.next(stepRequest); // stepRequest.context holds the real values
 */
import type { TokenSource } from '../../shared/contract/contract-vocabulary.ts';
import { AppError } from '../../shared/errors.ts';
import {
  skippedReply,
  withheldReply,
  type CloudClient,
  type CloudConversation,
  type CloudStepReply,
  type CloudStepRequest,
  type ConversationOptions,
} from '../cloud/cloud-client.ts';
import type { CloudDisclosure } from '../cloud/cloud-disclosure.ts';
import { CloudGate } from '../cloud/cloud-gate.ts';
import { OutboundTextScan } from './outbound-scan.ts';
import type { Pseudonymiser } from './pseudonymiser.ts';

/**
 * A generation's conversation with `cloud`: through `pseudonymiser` when the generation has private values,
 * counted in `options.disclosure` either way.
 */
export function openConversation(cloud: CloudClient, options: Omit<ConversationOptions, 'gate'>, pseudonymiser: Pseudonymiser | undefined): CloudConversation {
  if (!pseudonymiser) return cloud.openConversation({ ...options, gate: CloudGate.OPEN });
  // One scan for the whole conversation: the streams it opens one after another carry one growing context.
  const gate = CloudGate.guarding(new OutboundTextScan(pseudonymiser.tokenizer, pseudonymiser.values));
  return new PseudonymisedConversation(() => cloud.openConversation({ ...options, gate }), pseudonymiser, options.disclosure);
}

/** Most tokens asked one at a time to finish a placeholder: longer than any placeholder's spelling. */
const MAX_PLACEHOLDER_TOKENS = 24;

export class PseudonymisedConversation implements CloudConversation {
  private inner: CloudConversation | undefined;
  /** What the shim of `inner` holds: the last cloud context sent and the tokens it returned. */
  private cloudHolds: readonly number[] = [];
  /** The real context after the last answered step (its context and reply): what a conditional step assumes. */
  private answered: readonly number[] | undefined;
  /** The last step, settled or not: a conditional step waits for it. */
  private last: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly open: () => CloudConversation,
    private readonly pseudonymiser: Pseudonymiser,
    private readonly disclosure: CloudDisclosure | undefined,
  ) {}

  next(request: CloudStepRequest): Promise<CloudStepReply> {
    const reply = request.conditional ? this.afterAssumed(request, this.last) : this.step(request);
    this.last = reply.catch(() => {});
    return reply;
  }

  /**
   * Sends the pseudonymised context ahead (CloudConversation.prefill), before any step: the cloud reads
   * placeholders there as in every step. A context that ends where a value may be under way is not sent.
   */
  prefill(request: CloudStepRequest): void {
    if (this.closed || this.inner) return;
    const cloud = this.toCloud(request);
    if (cloud.withheld) return;
    for (const p of cloud.placeholders) this.disclosure?.placeholders.add(p);
    this.inner = this.open();
    this.cloudHolds = cloud.ids;
    this.inner.prefill?.({ ...request, context: cloud.ids, sources: cloud.sources, hiddenState: undefined });
  }

  /**
   * Sends the tokens decided since the last message, pseudonymised (CloudConversation.extend), when the
   * conversation underneath holds what they extend. A context that ends where a value may be under way is not
   * sent; the next step meets the same rule.
   */
  extend(request: CloudStepRequest): void {
    if (this.closed || !this.inner?.extend) return;
    const cloud = this.toCloud(request);
    if (cloud.withheld || !startsWith(cloud.ids, this.cloudHolds)) return;
    for (const p of cloud.placeholders) this.disclosure?.placeholders.add(p);
    this.cloudHolds = cloud.ids;
    this.inner.extend({ ...request, context: cloud.ids, sources: cloud.sources, hiddenState: undefined });
  }

  /** Closes the conversation underneath, which settles a step still in flight (its deadline bounds the wait). */
  async close(): Promise<void> {
    this.closed = true;
    await this.inner?.close();
  }

  /** The request's context as the cloud may read it (pseudonymiser.toCloud), its time counted. */
  private toCloud(request: CloudStepRequest): ReturnType<Pseudonymiser['toCloud']> {
    const translating = performance.now();
    const cloud = this.pseudonymiser.toCloud(request.context, request.sources);
    this.spent(translating);
    return cloud;
  }

  /** Counts the time since `since` in the generation's record of what privacy costs. */
  private spent(since: number): void {
    if (this.disclosure) this.disclosure.pseudonymMs += performance.now() - since;
  }

  private async afterAssumed(request: CloudStepRequest, assumed: Promise<unknown>): Promise<CloudStepReply> {
    await assumed;
    // Steps go one at a time, so `answered` is the assumed step's outcome: undefined when it failed or sent nothing.
    const answered = this.answered;
    if (this.closed || !answered || !startsWith(request.context, answered)) return skippedReply();
    return this.step({ ...request, conditional: false });
  }

  private async step(request: CloudStepRequest): Promise<CloudStepReply> {
    this.answered = undefined;
    if (this.closed) throw new AppError('FAILED_PRECONDITION', 'the cloud conversation is closed');
    const cloud = this.toCloud(request);
    if (cloud.withheld) {
      if (this.disclosure) this.disclosure.withheldSteps++;
      return withheldReply();
    }
    for (const p of cloud.placeholders) this.disclosure?.placeholders.add(p);
    if (this.inner && !startsWith(cloud.ids, this.cloudHolds)) {
      void this.inner.close().catch(() => {});
      this.inner = undefined;
    }
    const inner = (this.inner ??= this.open());
    const room = Math.max(request.maxTokens, request.room ?? 0);
    let context: number[] = cloud.ids;
    let sources: TokenSource[] = cloud.sources;
    this.cloudHolds = context;
    const written: number[] = [];
    const replies: CloudStepReply[] = [];
    // Tokens asked since the reply last completed a placeholder: placeholders back to back (whose brackets a
    // tokenizer may merge into one token) each get their own allowance.
    let sincePlaceholder = 0;
    let complete = 0;
    for (let asked = 0; ; asked++, sincePlaceholder++) {
      const reply = await inner.next({
        ...request,
        context,
        sources,
        hiddenState: undefined,
        conditional: false,
        maxTokens: asked === 0 ? request.maxTokens : 1,
      });
      if (reply.tokens.length === 0) {
        // Nothing computed (overloaded): after a placeholder's first tokens, what was written stands.
        if (written.length === 0) return reply;
        break;
      }
      replies.push(reply);
      written.push(...reply.tokens);
      context = [...context, ...reply.tokens];
      sources = [...sources, ...reply.tokens.map((): TokenSource => 'llm')];
      this.cloudHolds = context;
      const stopped = reply.tokens.some((id) => request.stopTokenIds.includes(id));
      const translating = performance.now();
      const reached = this.pseudonymiser.placeholdersIn(cloud.ids, written);
      this.spent(translating);
      if (reached.complete > complete) [complete, sincePlaceholder] = [reached.complete, 0];
      if (stopped || !reached.inside || sincePlaceholder + 1 >= MAX_PLACEHOLDER_TOKENS || written.length >= room + MAX_PLACEHOLDER_TOKENS) break;
    }
    this.disclosure?.holds(context);
    const restoring = performance.now();
    const { ids, restored, text } = this.pseudonymiser.fromCloud(cloud.ids, written, request.context.length);
    this.spent(restoring);
    // A restored value goes whole where the generation has room: cut short, the edge model would have to finish it.
    // Tokens read past the span to see whether a placeholder came ("[" that starts none) are kept too: the shim
    // holds them, and dropping them would make the next step disagree with it and open a new stream.
    const pastSpan = restored || written.length > request.maxTokens;
    const tokens = ids.slice(0, pastSpan ? room : request.maxTokens);
    this.answered = [...request.context, ...tokens];
    const lastReply = replies[replies.length - 1]!;
    const kept = !restored && tokens.length === written.length;
    return {
      ...lastReply,
      ...(pastSpan ? { pastSpan } : {}),
      tokens,
      text: kept ? replies.map((r) => r.text).join('') : tokens.length === ids.length ? text : this.pseudonymiser.textAfter(cloud.ids, tokens),
      // Figures of the cloud's tokens describe them, not the value's tokens put in their place.
      logprobs: kept ? replies.flatMap((r) => r.logprobs).slice(0, tokens.length) : tokens.map(() => Number.NaN),
      topAlternatives: kept ? replies.flatMap((r) => r.topAlternatives).slice(0, tokens.length) : tokens.map(() => []),
      backendMs: replies.reduce((sum, r) => sum + r.backendMs, 0),
      shimMs: replies.reduce((sum, r) => sum + r.shimMs, 0),
    };
  }
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  if (ids.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false;
  return true;
}
