/**
 * One CloudConversation over Route streams: the edge's side of one generation's talk with the shim. The
 * stream opens at the first `next` with the whole context, or before it with `prefill` (the shim prefills
 * the context ahead; a shim that ends that stream before its `prefilled` never read the step sent behind, which
 * goes again on a new stream), and carries one step at a time after that, with the tokens the edge decided
 * sent ahead between steps when the loop extends (the messages are context-delta.ts's). A stream that broke, expired or disagrees with the edge's
 * context is dropped and the next step opens another with the whole context. One rule resends a step: the
 * shim ended the reused stream before looking at it (idle expiry, shutdown); any other failure answers the
 * step. A conditional step is a step with an assumption: it goes out behind the step in flight on the same
 * stream and reads its result after that one's; when the stream fails, both steps fail and neither is sent
 * again. A failed step's error says why in plain words (cloud-failure-reason.ts): that is what the page shows
 * on a fallback token. Where the stream is and how many steps are in flight is one state
 * (route-stream-states.ts), changed only through its transitions; the stream itself is a LiveRouteStream.
 *
 * Where streams come from is the host's business (RouteStreamHost): GrpcCloudClient opens them on its
 * channel behind the circuit breaker; the lab's in-process cloud over an in-memory pipe to the shim's core.
 *
 * A step the shim refused as overloaded is answered, not failed (the reply says `overloaded`, the loop decides
 * the position), and counts as a success for the breaker like any reply: the shim is up and answering, and a
 * busy cloud that refuses quickly is what the breaker must not trip on. A conversation's own, shorter step
 * deadline is sent in `open` (the shim refuses by it) and bounds the wait for each reply.
 *
 * @example
 * const conversation = new GrpcCloudConversation(host, { requestId: 'r1', routingKey: 'chat-42', signal });
 * const reply = await conversation.next(stepRequest);
 * await conversation.close();
 */
import { AppError } from '../../shared/errors.ts';
import { toAppError } from '../../shared/grpc/errors.ts';
import type { RouteRequest } from '../../shared/grpc/proto.ts';
import { abortReason } from '../../shared/grpc/stream.ts';
import { CircuitOpenError } from './cloud-backoff.ts';
import { skippedReply, withheldReply, type CloudConversation, type CloudStepReply, type CloudStepRequest, type ConversationOptions } from './cloud-client.ts';
import { withPlainReason } from './cloud-failure-reason.ts';
import type { CloudGate, PassedMessages } from './cloud-gate.ts';
import { checkSources, loadOf, ShimContextCopy, toReply } from './context-delta.ts';
import { LiveRouteStream, PredecessorFailed, StreamEnded, type RouteStream, type SentStep } from './live-route-stream.ts';
import {
  enterRouteStreamState,
  INITIAL_ROUTE_STREAM_STATE,
  isRefusal,
  mayResend,
  routeStreamTransition,
  type RouteStreamEvent,
} from './route-stream-states.ts';

import { CREDENTIAL_REFUSALS, TRANSPORT_FAILURES, type RouteStreamHost } from './route-stream-host.ts';

export type { RouteStream } from './live-route-stream.ts';
export { CREDENTIAL_REFUSALS, type RouteStreamHost, type StepFailure } from './route-stream-host.ts';

/** What a conditional step assumes: the step in flight, which it is written behind and read after. */
interface Assumption {
  readonly predecessor: Promise<unknown>;
  /** Built when the step is asked for: it starts where the predecessor's reply will go. */
  readonly message: RouteRequest;
}

export class GrpcCloudConversation implements CloudConversation {
  private state = INITIAL_ROUTE_STREAM_STATE;
  /** The stream while the state is `opening` or `open`. */
  private live: LiveRouteStream | undefined;
  private readonly shim = new ShimContextCopy();
  /** The last step's reply: a conditional step reads after it, and close waits for it. */
  private lastReply: Promise<unknown> = Promise.resolve();

  private readonly requestId: string;
  private readonly signal: AbortSignal | undefined;
  /** Sent in every `open`, reopened streams included: the shim's backend keeps the generation on one worker by it. */
  private readonly routingKey: string;
  /** This conversation's step deadline when shorter than the host's (a wait budget); the host's otherwise. */
  private readonly ownStepTimeoutMs: number | undefined;
  private readonly disclosure: ConversationOptions['disclosure'];
  /** What every message passes on its way out. */
  private readonly gate: CloudGate;

  constructor(
    private readonly host: RouteStreamHost,
    options: ConversationOptions,
  ) {
    this.requestId = options.requestId;
    this.signal = options.signal;
    this.routingKey = options.routingKey ?? '';
    this.ownStepTimeoutMs = options.stepTimeoutMs;
    this.disclosure = options.disclosure;
    this.gate = options.gate;
    this.signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  /** The shim's id for the current stream's session (for logs). */
  get sessionId(): string | undefined {
    return this.live?.sessionId;
  }

  /** The current stream's reader: tests wait on it for a final message that nothing public shows. */
  private get reader() {
    return this.live?.reader;
  }

  /** The deadline of each step: sent in `open` (the shim refuses by it) and enforced on the reply. */
  get stepTimeoutMs(): number {
    const own = this.ownStepTimeoutMs;
    return own !== undefined && own > 0 ? Math.min(own, this.host.stepTimeoutMs) : this.host.stepTimeoutMs;
  }

  private readonly onAbort = () => this.dropStream();

  /** Opens the stream ahead of the first step, with the whole context and `prefill` (CloudConversation.prefill). */
  prefill(request: CloudStepRequest): void {
    if (this.live || this.state.phase !== 'no-stream' || this.state.inFlight > 0 || this.signal?.aborted) return;
    checkSources(request);
    const messages = this.gate.pass(this.shim.openAhead(request, this.requestId, this.stepTimeoutMs, this.routingKey), request.context);
    let stream: RouteStream | undefined;
    try {
      // The breaker refuses without trying (CircuitOpenError): then the first step finds it as it would have.
      if (messages) stream = this.host.startStream();
    } catch {}
    if (!messages || !stream) return this.shim.reset();
    this.disclosure?.holds(this.shim.context);
    this.enter('ahead');
    this.live = new LiveRouteStream(stream, (opened) => this.host.sessionOpened?.(opened), { ahead: true });
    // A write that fails shows on the first step, which then opens another stream.
    this.written(this.live, messages, { reused: false }).written.catch(() => {});
  }

  /**
   * Sends the tokens the edge decided since the last message on the stream (CloudConversation.extend), for
   * the shim to compute before the next step. Only on a stream with no step in flight (a step's reply moves
   * the shim's context on; the next step carries what was decided meanwhile) and through the gate like any
   * message: what the gate stops is not sent, and the next step meets the gate again.
   */
  extend(request: CloudStepRequest): void {
    const live = this.live;
    if (!live || this.state.inFlight > 0 || this.signal?.aborted) return;
    // A stream the shim ended, or whose context is not the edge's: the next step replaces it. What the shim said
    // on its own (`opened`, `prefilled`) is left for the next step to read: a tokenizer it refuses fails a step.
    if (live.reader.finished || !this.shim.matches(request.context)) return;
    checkSources(request);
    const from = this.shim.length;
    const message = this.shim.extend(request);
    if (!message) return;
    const passed = this.gate.pass([message], request.context);
    if (!passed) return this.shim.forget(from);
    this.disclosure?.holds(this.shim.context);
    // A write that fails shows on the next step, which then opens another stream.
    this.written(live, passed, { reused: true }).written.catch(() => {});
  }

  async next(request: CloudStepRequest): Promise<CloudStepReply> {
    const pipelined = request.conditional === true && this.state.inFlight > 0;
    // A conditional step whose assumption is already answered: sent as a plain step, or skipped without asking.
    if (request.conditional && !pipelined && this.live && !this.shim.matches(request.context)) return skippedReply();
    this.enter(pipelined ? 'pipeline' : 'step');
    const reply = this.step(request, pipelined);
    this.lastReply = reply;
    try {
      return await reply;
    } finally {
      this.enter('settle');
    }
  }

  private async step(request: CloudStepRequest, pipelined: boolean): Promise<CloudStepReply> {
    const signal = this.signalFor(request);
    // Refused before anything is sent: nothing for the breaker to count. So is a conditional step that does
    // not extend the context of the step in flight (the loop's bug), whose message is built now, before that
    // step's reply moves the copy on.
    if (signal?.aborted) throw abortReason(signal);
    checkSources(request);
    const since = this.host.failureMark?.();
    const assumes = pipelined ? { predecessor: this.lastReply, message: this.shim.conditionalStep(request) } : undefined;
    try {
      try {
        return await this.attempt(request, signal, assumes);
      } catch (e) {
        // The one resend: the shim ended the stream this step reused before looking at it, and nothing else
        // rides on it (see StreamEnded.resendable, mayResend). A step with an assumption is never sent again.
        if (assumes || !(e instanceof StreamEnded) || !e.resendable || !mayResend(this.state) || signal?.aborted) throw e;
        return await this.attempt(request, signal, undefined);
      }
    } catch (e) {
      // The step it assumed failed and said so to the breaker already; this one only follows it.
      if (e instanceof PredecessorFailed) throw e;
      throw this.failed(e, signal, since);
    }
  }

  /** Sends the step once (on a new stream when there is none) and reads its result; a failure drops its stream. */
  private async attempt(request: CloudStepRequest, signal: AbortSignal | undefined, assumes: Assumption | undefined): Promise<CloudStepReply> {
    let sent: SentStep | undefined;
    try {
      sent = assumes ? this.sendAssumed(request, assumes) : this.send(request);
      if (!sent) return this.blocked(assumes !== undefined);
      await sent.written;
      if (assumes) {
        await assumes.predecessor.catch(() => {});
        if (this.live !== sent.live) throw new PredecessorFailed();
      }
      const result = await sent.live.result(sent, this.stepTimeoutMs, signal);
      this.enter('answer');
      if (result.skipped) return { ...skippedReply(), ...loadOf(result) };
      this.host.stepSucceeded();
      const agrees = assumes ? this.shim.answeredConditional(request, result) : this.shim.answered(result);
      if (!agrees) this.dropStream();
      else this.disclosure?.holds(this.shim.context);
      return toReply(result);
    } catch (e) {
      if (sent === undefined || this.live === sent.live) this.dropStream();
      throw e;
    }
  }

  /**
   * Writes a step on the open stream, or opens one with the whole context; the shim's copy takes it in.
   * Undefined when the gate stopped it: nothing was written, and the copy, which took it in, starts over.
   */
  private send(request: CloudStepRequest): SentStep | undefined {
    // A stream that ended between steps or whose context diverged from the edge's is replaced.
    if (this.live && (this.live.endedBetweenSteps() || !this.shim.matches(request.context))) this.dropStream();
    if (this.live) {
      const passed = this.passed([this.shim.step(request)], request.context);
      return passed && this.written(this.live, passed, { reused: true });
    }
    const passed = this.passed(this.shim.open(request, this.requestId, this.stepTimeoutMs, this.routingKey), request.context);
    if (!passed) return undefined;
    this.enter('open');
    this.live = new LiveRouteStream(this.host.startStream(), (opened) => this.host.sessionOpened?.(opened));
    return this.written(this.live, passed, { reused: false });
  }

  /** A conditional step's message behind the step in flight, when the gate passes it. */
  private sendAssumed(request: CloudStepRequest, assumes: Assumption): SentStep | undefined {
    const passed = this.passed([assumes.message], request.context);
    return passed && this.written(this.live!, passed, { reused: true, behind: true });
  }

  /** `messages` through the gate; undefined when the gate stopped them, which the record of what left counts. */
  private passed(messages: RouteRequest[], contextAfter: readonly number[]): PassedMessages | undefined {
    const passed = this.gate.pass(messages, contextAfter);
    if (!passed && this.disclosure) this.disclosure.gateBlockedSteps++;
    return passed;
  }

  /** Writes passed messages on `live`, counted in the record of what left once a stream carries them. */
  private written(live: LiveRouteStream, messages: PassedMessages, options: { reused: boolean; behind?: boolean }): SentStep {
    this.disclosure?.sent(messages);
    return live.send(messages, options);
  }

  /**
   * The reply to a step the gate stopped: the edge decides the position. A plain step's ids are in the copy
   * already, so the stream is dropped (the next step opens another, through the gate again); a conditional
   * step's are not, and the step in flight goes on.
   */
  private blocked(conditional: boolean): CloudStepReply {
    if (!conditional) {
      if (this.live) this.dropStream();
      else this.shim.reset();
    }
    return withheldReply();
  }

  private signalFor(request: CloudStepRequest): AbortSignal | undefined {
    const signals = [request.signal, this.signal].filter((s): s is AbortSignal => s !== undefined);
    return signals.length > 1 ? AbortSignal.any(signals) : signals[0];
  }

  /** Reports a failed step to the host's breaker; returns the error to throw, in plain words. */
  private failed(e: unknown, signal: AbortSignal | undefined, since: number | undefined): AppError {
    const error = signal?.aborted ? abortReason(signal) : toAppError(e);
    // A refusal by the breaker tried nothing, so it says nothing about the cloud; an attempt that was
    // cancelled or refused as a bad request says nothing either, but may have been the half-open probe.
    if (e instanceof CircuitOpenError) return error;
    // Past a deadline shorter than the host's (a wait budget's), the edge gave up on the step by its own choice:
    // a cloud slower than the budget is not a broken one, and the budget itself backs off (wait-budget.ts).
    const budgetMissed = error.code === 'DEADLINE_EXCEEDED' && this.stepTimeoutMs < this.host.stepTimeoutMs;
    if (!signal?.aborted && CREDENTIAL_REFUSALS.has(error.code)) this.host.stepFailed('refused');
    else if (signal?.aborted || budgetMissed || !TRANSPORT_FAILURES.has(error.code)) this.host.stepFailed('abandoned');
    else this.host.stepFailed(error.code === 'DEADLINE_EXCEEDED' ? 'deadline' : 'error', since);
    return withPlainReason(error);
  }

  async close(): Promise<void> {
    const closing = routeStreamTransition(this.state, 'close');
    if (isRefusal(closing)) return; // closed already
    this.state = closing;
    this.signal?.removeEventListener('abort', this.onAbort);
    const live = this.live;
    this.live = undefined;
    try {
      if (live && !live.reader.finished) {
        const deadline = AbortSignal.timeout(this.host.closeTimeoutMs);
        // A step still in flight (a conditional step the generation no longer needs, usually skipped) reads
        // its own result first: the half-close must be the stream's only reader.
        if (this.state.inFlight > 0)
          await Promise.race([this.lastReply.catch(() => {}), new Promise((resolve) => deadline.addEventListener('abort', resolve, { once: true }))]);
        await live.halfClose(deadline);
      }
    } finally {
      this.enter('closed');
      this.host.forget(this);
    }
  }

  private dropStream(): void {
    this.live?.stream.cancel();
    this.live = undefined;
    this.shim.reset();
    this.enter('drop');
  }

  private enter(event: RouteStreamEvent): void {
    this.state = enterRouteStreamState(this.state, event);
  }
}
