/**
 * The CloudClient the edge uses in production: the cloud shim over gRPC, one bidirectional stream per
 * CloudConversation. The channel is created at the first routed token; the session's stream opens with the
 * whole context at its first `next`, and every later step carries only the ids the shim has not seen (the
 * client tracks the shim's copy of the context, including the tokens the shim itself returned). Each step
 * has a deadline; a stream that broke, expired or disagrees with the edge's context is reopened with the
 * whole context at the next step. Repeated transport failures (or one missed deadline) open a circuit
 * with exponential backoff (see CloudBackoff), during which steps fail at once with UNAVAILABLE (the
 * decoding loop then falls back to the edge model); the channel's own reconnection follows the same delays.
 * While the breaker holds failures, the shim's gRPC health service is probed on the same schedule (see
 * CloudHealthProbe), so a shim that came back shows `ready` again without a routed token. A failed step's
 * error says why in plain words (cloud-failure-reason.ts): that is what the page shows on a fallback token.
 * A conditional step (see the proto) goes out behind the step in flight on the same stream and reads its
 * result after that one's; when the stream fails, both steps fail and neither is sent again.
 *
 * @example
 * const cloud = new GrpcCloudClient({ address: 'cloud.example:50061', authToken, tls: { caFile: 'ca.pem' } });
 * const session = cloud.openConversation({ requestId: 'r1', signal });
 * const reply = await session.next(stepRequest);
 * await session.close(); await cloud.close();
 */
import { connectivityState, Metadata, type ChannelOptions, type ClientDuplexStream } from '@grpc/grpc-js';
import { AppError } from '../shared/errors.ts';
import { bearer } from '../shared/grpc/auth.ts';
import { appErrorCode, toAppError } from '../shared/grpc/errors.ts';
import {
  CLOUD_ROUTER_SERVICE_NAME,
  CloudRouterClient,
  HealthClient,
  type CloudRouterClientType,
  type HealthClientType,
  type RouteRequest,
  type RouteResponse__Output,
  type Sampling,
  type StepResult__Output,
} from '../shared/grpc/proto.ts';
import { abortReason, StreamReader, writeMessage } from '../shared/grpc/stream.ts';
import { clientTls, type ClientTlsFiles } from '../shared/grpc/tls.ts';
import { toWireSources } from '../shared/grpc/wire.ts';
import { CircuitOpenError, CloudBackoff } from './cloud-backoff.ts';
import { withPlainReason } from './cloud-failure-reason.ts';
import { CloudHealthProbe, realProbeClock, type ProbeClock } from './cloud-health-probe.ts';
import { skippedReply, type CloudClient, type CloudConnectionState, type CloudConversation, type CloudStepReply, type CloudStepRequest } from './cloud-client.ts';

export interface GrpcCloudClientOptions {
  /** `host:port` of the shim. */
  address: string;
  /** Sent as `authorization: Bearer <token>` on every call. */
  authToken?: string;
  /** TLS (with a client certificate: mutual TLS); plaintext when absent. */
  tls?: ClientTlsFiles;
  /** The name the server certificate must carry, when it is not the host of `address`. */
  tlsServerName?: string;
  /** Deadline of one step, from sending it to its reply. Default 10 s. */
  stepTimeoutMs?: number;
  /** gRPC deadline of a whole stream (one generation). Default 30 min. */
  sessionTimeoutMs?: number;
  /** How long `close` waits for the shim to confirm the end of a stream. Default 2 s. */
  closeTimeoutMs?: number;
  /** Message size limit, both directions. Default 4 MiB. */
  maxMessageBytes?: number;
  /**
   * Circuit breaker: how many transport failures in a row open it (default 3; a missed step deadline opens
   * it at once), and its delays, which also pace the channel's reconnection attempts (default 250 ms
   * doubling up to 10 s).
   */
  backoff?: { initialMs?: number; maxMs?: number; failureThreshold?: number };
  /** HTTP/2 keepalive ping interval. Default 30 s. */
  keepaliveMs?: number;
  /**
   * A connection of this client's own. grpc-js otherwise shares one connection between all clients in a
   * process with the same address and options; a load test that stands in for many edge boxes needs one each.
   */
  ownConnection?: boolean;
  /**
   * Probe the shim's health service while the breaker holds failures (default true). Off, only a routed
   * step can find out that the shim is back.
   */
  healthProbe?: boolean;
  /** The breaker's clock and the probe's timers (tests inject one; default performance.now, unref'd timers). */
  clock?: ProbeClock;
}

type RouteStream = ClientDuplexStream<RouteRequest, RouteResponse__Output>;

/** Failures that say the shim is gone, broken or overloaded, rather than that the request was wrong. */
const TRANSPORT_FAILURES = new Set<AppError['code']>(['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'INTERNAL', 'RESOURCE_EXHAUSTED']);

export class GrpcCloudClient implements CloudClient {
  readonly backoff: CloudBackoff;
  readonly probe: CloudHealthProbe;
  private client: CloudRouterClientType | undefined;
  private health: HealthClientType | undefined;
  private readonly sessions = new Set<GrpcCloudSession>();
  private closed = false;

  constructor(readonly options: GrpcCloudClientOptions) {
    const { initialMs = 250, maxMs = 10_000, failureThreshold } = options.backoff ?? {};
    const clock = options.clock ?? realProbeClock;
    this.backoff = new CloudBackoff({ initialMs, maxMs, failureThreshold }, () => clock.now());
    this.probe = new CloudHealthProbe(this.backoff, (signal) => this.checkHealth(signal), clock);
  }

  openConversation(options: { requestId: string; signal?: AbortSignal }): CloudConversation {
    if (this.closed) throw new AppError('FAILED_PRECONDITION', 'the cloud client is closed');
    const session = new GrpcCloudSession(this, options.requestId, options.signal);
    this.sessions.add(session);
    return session;
  }

  state(): CloudConnectionState {
    if (this.backoff.state === 'open') return 'circuit-open';
    // The last attempt failed: whatever the channel says (a dropped connection leaves it IDLE, a slow shim
    // READY, a reconnection in the background CONNECTING), the cloud serves no tokens until one succeeds.
    if (this.backoff.consecutiveFailures > 0) return 'unavailable';
    switch (this.client?.getChannel().getConnectivityState(false)) {
      case connectivityState.READY:
        return 'ready';
      case connectivityState.CONNECTING:
        return 'connecting';
      case connectivityState.TRANSIENT_FAILURE:
        return 'unavailable';
      default:
        return 'idle';
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.probe.close();
    await Promise.allSettled([...this.sessions].map((s) => s.close()));
    // The health client shares the router client's channel: closing that one closes both.
    this.client?.close();
    this.client = undefined;
    this.health = undefined;
  }

  /** @internal a step failed or was abandoned: the probe follows the breaker's new schedule. */
  afterFailure(): void {
    if (this.options.healthProbe !== false) this.probe.schedule();
  }

  /** Asks the shim's health service about the CloudRouter, on the routing channel, under the step deadline. */
  private checkHealth(signal: AbortSignal): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    this.connection();
    const ms = this.options.stepTimeoutMs ?? 10_000;
    return new Promise<boolean>((resolve, reject) => {
      const call = this.health!.Check({ service: CLOUD_ROUTER_SERVICE_NAME }, { deadline: Date.now() + ms }, (error, reply) =>
        error ? reject(error) : resolve(reply?.status === 'SERVING'),
      );
      signal.addEventListener('abort', () => call.cancel(), { once: true });
    });
  }

  /** @internal opens a Route stream, creating the channel on first use. */
  startStream(): RouteStream {
    if (this.closed) throw new AppError('FAILED_PRECONDITION', 'the cloud client is closed');
    this.backoff.check();
    const metadata = new Metadata();
    if (this.options.authToken) metadata.set('authorization', bearer(this.options.authToken));
    return this.connection().Route(metadata, { deadline: Date.now() + (this.options.sessionTimeoutMs ?? 30 * 60_000) });
  }

  /** @internal */
  forget(session: GrpcCloudSession): void {
    this.sessions.delete(session);
  }

  private connection(): CloudRouterClientType {
    if (this.client) return this.client;
    const { address, tls, tlsServerName, maxMessageBytes = 4 << 20, keepaliveMs = 30_000 } = this.options;
    const secure = clientTls(address, tls, tlsServerName);
    const channelOptions: ChannelOptions = {
      'grpc.max_receive_message_length': maxMessageBytes,
      'grpc.max_send_message_length': maxMessageBytes,
      'grpc.keepalive_time_ms': keepaliveMs,
      'grpc.keepalive_timeout_ms': 10_000,
      // The channel retries a lost connection on the breaker's schedule, so a shim that comes back is
      // reached as soon as the circuit lets a probe through (not after a longer channel backoff).
      'grpc.initial_reconnect_backoff_ms': this.backoff.options.initialMs,
      'grpc.max_reconnect_backoff_ms': this.backoff.options.maxMs,
      ...(this.options.ownConnection ? { 'grpc.use_local_subchannel_pool': 1 } : {}),
      ...secure.options,
    };
    this.client = new CloudRouterClient(address, secure.credentials, channelOptions);
    this.health = new HealthClient(address, secure.credentials, { channelOverride: this.client.getChannel() });
    return this.client;
  }
}

class GrpcCloudSession implements CloudConversation {
  private stream: RouteStream | undefined;
  private reader: StreamReader<RouteResponse__Output> | undefined;
  /** The context as the shim holds it: what was sent plus what the shim returned. */
  private shimIds: number[] = [];
  /** How much of the edge's context has been checked against `shimIds`. */
  private verified = 0;
  private samplingKey = '';
  /** Steps the current stream has answered. */
  private steps = 0;
  /** Steps sent and not answered: a conditional step may join one. */
  private inFlight = 0;
  /** Settle once the last step's messages are written, and once its result is read: a conditional step waits for both. */
  private written: Promise<unknown> = Promise.resolve();
  private answered: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** The shim's id for the current stream's session (for logs). */
  sessionId: string | undefined;

  constructor(
    private readonly owner: GrpcCloudClient,
    private readonly requestId: string,
    private readonly signal: AbortSignal | undefined,
  ) {
    signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  private readonly onAbort = () => this.dropStream();

  async next(request: CloudStepRequest): Promise<CloudStepReply> {
    if (this.closed) throw new AppError('FAILED_PRECONDITION', 'the cloud session is closed');
    const pipelined = request.conditional === true && this.inFlight === 1 && this.stream !== undefined;
    if (this.inFlight > 0 && !pipelined) {
      throw new AppError('FAILED_PRECONDITION', 'a step of this session is still in flight: only one conditional step may join it');
    }
    // A conditional step whose assumption is already answered: sent as a plain step, or skipped without asking.
    if (request.conditional && !pipelined && this.stream && !this.matchesShim(request.context)) return skippedReply();
    this.inFlight++;
    const reply = pipelined ? this.conditionalStep(request) : this.step(request);
    this.answered = reply;
    try {
      return await reply;
    } finally {
      this.inFlight--;
    }
  }

  /**
   * Sends a step while the previous one is in flight, assuming its token (see the proto), and reads its
   * result after the previous one's. It is never sent again: when the stream fails, both steps fail.
   */
  private async conditionalStep(request: CloudStepRequest): Promise<CloudStepReply> {
    const signal = this.signalFor(request);
    const { stream, reader } = this;
    const previous = { written: this.written, answered: this.answered };
    // What the shim holds once the previous step's ids are in, without its reply: the conditional step starts
    // at that reply's position, with the edge's guess for it.
    const offset = this.shimIds.length;
    const sent = this.shimIds;
    if (request.sources.length !== request.context.length) {
      throw new AppError('INVALID_ARGUMENT', `context has ${request.context.length} ids but ${request.sources.length} sources`);
    }
    if (request.context.length <= offset || sent.some((id, i) => request.context[i] !== id)) {
      throw new AppError('FAILED_PRECONDITION', 'a conditional step must extend the context of the step in flight by the token it assumes');
    }
    const ids = request.context.slice(offset);
    const message: RouteRequest = { step: { ...stepMessage(request, offset, ids, toWireSources(request.sources.slice(offset))), conditional: true } };
    const sampling = wireSampling(request);
    const key = JSON.stringify(sampling);
    if (key !== this.samplingKey) {
      message.step!.sampling = sampling;
      this.samplingKey = key;
    }
    try {
      if (signal?.aborted) throw abortReason(signal);
      const writing = previous.written.catch(() => {}).then(() => writeMessage(stream!, message));
      this.written = writing;
      await writing;
      await previous.answered.catch(() => {});
      if (this.stream !== stream) throw new PredecessorFailed();
      const result = await this.awaitResult(signal, reader!);
      this.steps++;
      if (result.skipped) return skippedReply();
      this.owner.backoff.success();
      // Its ids are the edge's (checked against the reply it assumed by the shim); the returned ones are not yet.
      this.shimIds.push(...request.context.slice(this.shimIds.length));
      this.verified = this.shimIds.length;
      this.shimIds.push(...result.ids);
      if (result.contextLength !== this.shimIds.length) this.dropStream();
      return toReply(result);
    } catch (e) {
      if (this.stream === stream) this.dropStream();
      // The step it assumed failed and said so to the breaker already; this one only follows it.
      if (e instanceof PredecessorFailed) throw e;
      throw this.failed(e, signal);
    }
  }

  private signalFor(request: CloudStepRequest): AbortSignal | undefined {
    const signals = [request.signal, this.signal].filter((s): s is AbortSignal => s !== undefined);
    return signals.length > 1 ? AbortSignal.any(signals) : signals[0];
  }

  private async step(request: CloudStepRequest): Promise<CloudStepReply> {
    const signal = this.signalFor(request);
    if (signal?.aborted) throw abortReason(signal);
    if (request.sources.length !== request.context.length) {
      throw new AppError('INVALID_ARGUMENT', `context has ${request.context.length} ids but ${request.sources.length} sources`);
    }
    // A stream that ended between steps (idle expiry, shim shutdown: the shim sends nothing between steps
    // but its final message) or whose context diverged from the edge's is replaced by a new one carrying
    // the whole context.
    if (this.stream && (this.reader!.finished || this.reader!.buffered > 0 || !this.matchesShim(request.context))) this.dropStream();
    try {
      try {
        return await this.attempt(request, signal);
      } catch (e) {
        // The shim ended the stream we were reusing while this step was on its way, without computing it:
        // it expired the idle session (its final message crossed the step), or it ended as UNAVAILABLE
        // (shutting down, backend unreachable: a retry fails fast if that persists). The step is retried
        // once on a new stream. Any other end answers this step (the shim saw it and failed it, e.g. at its
        // deadline): retrying would only make the edge wait again.
        // Not when a conditional step was sent behind it on that stream: it fails with it (no resend of pipelined steps).
        const resendable = e instanceof StreamEnded && (e.code === 'UNAVAILABLE' || e.expired) && this.inFlight === 1;
        if (!resendable || !e.reused || e.steps !== e.stepsBefore || signal?.aborted) throw e;
        return await this.attempt(request, signal);
      }
    } catch (e) {
      this.dropStream();
      throw this.failed(e, signal);
    }
  }

  /** Reports a failed step to the breaker; returns the error to throw, in plain words. */
  private failed(e: unknown, signal: AbortSignal | undefined): AppError {
    const error = signal?.aborted ? abortReason(signal) : toAppError(e);
    // A refusal by the breaker tried nothing, so it says nothing about the cloud; an attempt that was
    // cancelled or refused as a bad request says nothing either, but may have been the half-open probe.
    if (e instanceof CircuitOpenError) return error;
    if (signal?.aborted || !TRANSPORT_FAILURES.has(error.code)) this.owner.backoff.abandon();
    else this.owner.backoff.failure(error.code === 'DEADLINE_EXCEEDED' ? 'deadline' : 'error');
    this.owner.afterFailure();
    return withPlainReason(error);
  }

  /** Sends one step (opening a stream first when there is none) and waits for its result. */
  private async attempt(request: CloudStepRequest, signal: AbortSignal | undefined): Promise<CloudStepReply> {
    const sampling = wireSampling(request);
    const key = JSON.stringify(sampling);
    const reused = this.stream !== undefined;
    const messages: RouteRequest[] = [];
    if (!this.stream) {
      this.stream = this.owner.startStream();
      this.reader = new StreamReader<RouteResponse__Output>(this.stream);
      this.shimIds = [...request.context];
      this.verified = this.shimIds.length;
      this.samplingKey = key;
      this.steps = 0;
      const { stepTimeoutMs = 10_000 } = this.owner.options;
      messages.push({
        open: { requestId: this.requestId, sampling, contextIds: [...this.shimIds], contextSources: toWireSources(request.sources), stepTimeoutMs },
      });
      messages.push({ step: stepMessage(request, this.shimIds.length, [], []) });
    } else {
      const from = this.shimIds.length;
      const ids = request.context.slice(from);
      const message: RouteRequest = { step: stepMessage(request, from, ids, toWireSources(request.sources.slice(from))) };
      if (key !== this.samplingKey) {
        message.step!.sampling = sampling;
        this.samplingKey = key;
      }
      messages.push(message);
      this.shimIds.push(...ids);
      this.verified = this.shimIds.length;
    }
    const stepsBefore = this.steps;
    const stream = this.stream;
    try {
      // A conditional step sent meanwhile is written after these (see conditionalStep).
      const writing = (async () => {
        for (const m of messages) await writeMessage(stream, m);
      })();
      this.written = writing;
      await writing;
      const result = await this.awaitResult(signal, this.reader!);
      this.owner.backoff.success();
      this.steps++;
      this.shimIds.push(...result.ids);
      if (result.contextLength !== this.shimIds.length) this.dropStream();
      return toReply(result);
    } catch (e) {
      this.dropStream();
      if (e instanceof StreamEnded) {
        e.reused = reused;
        e.stepsBefore = stepsBefore;
      }
      throw e;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.signal?.removeEventListener('abort', this.onAbort);
    const { stream, reader } = this;
    this.stream = undefined;
    this.reader = undefined;
    try {
      if (stream && reader && !reader.finished) {
        const deadline = AbortSignal.timeout(this.owner.options.closeTimeoutMs ?? 2_000);
        // A step still in flight (a conditional step the generation no longer needs, usually skipped) reads
        // its own result first: the half-close below must be the stream's only reader.
        if (this.inFlight > 0) await Promise.race([this.answered.catch(() => {}), new Promise((resolve) => deadline.addEventListener('abort', resolve, { once: true }))]);
        // Half-close: the shim answers with its final message and frees the session.
        stream.end();
        while (!(await reader.next(deadline)).done);
      }
    } catch {
      stream?.cancel();
    } finally {
      this.owner.forget(this);
    }
  }

  /** Reads until this step's result, under the step deadline. */
  private async awaitResult(signal: AbortSignal | undefined, reader: StreamReader<RouteResponse__Output>): Promise<StepResult__Output> {
    const ms = this.owner.options.stepTimeoutMs ?? 10_000;
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new AppError('DEADLINE_EXCEEDED', `cloud did not answer within ${ms} ms`)), ms);
    const wait = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
    try {
      while (true) {
        const next = await reader.next(wait);
        if (next.done) throw new AppError('UNAVAILABLE', 'the cloud ended the stream without answering the step');
        const response = next.value;
        if (response.opened) this.sessionId = response.opened.sessionId;
        else if (response.step) return response.step;
        else if (response.end) {
          const { code, message, steps, expired } = response.end;
          throw new StreamEnded(code === 0 ? 'UNAVAILABLE' : appErrorCode(code), code === 0 ? 'the cloud ended the stream without answering the step' : message, steps, expired);
        }
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Whether the edge's context still starts with what the shim holds (only new entries are compared). */
  private matchesShim(context: readonly number[]): boolean {
    if (context.length < this.shimIds.length) return false;
    for (let i = this.verified; i < this.shimIds.length; i++) if (context[i] !== this.shimIds[i]) return false;
    this.verified = this.shimIds.length;
    return true;
  }

  private dropStream(): void {
    this.stream?.cancel();
    this.stream = undefined;
    this.reader = undefined;
    this.shimIds = [];
    this.verified = 0;
  }
}

/** A conditional step's predecessor failed, and with it the stream both were on. */
class PredecessorFailed extends AppError {
  constructor() {
    super('UNAVAILABLE', 'the step this conditional step assumed failed; pipelined steps are not sent again');
  }
}

/** The shim's final message arrived instead of a step result; `steps` is how many steps it had answered. */
class StreamEnded extends AppError {
  reused = false;
  stepsBefore = 0;

  constructor(
    code: AppError['code'],
    message: string,
    readonly steps: number,
    /** The shim expired the session for idleness before it looked at the step on its way. */
    readonly expired: boolean,
  ) {
    super(code, message);
  }
}

function wireSampling(request: CloudStepRequest): Sampling {
  return {
    temperature: request.temperature,
    topP: request.topP,
    ...(request.seed !== undefined ? { seed: request.seed >>> 0 } : {}),
    stopTokenIds: [...request.stopTokenIds],
    topLogprobs: request.topLogprobs,
  };
}

/** The step message the client sends for `request` when the shim holds the context up to `offset`. */
export function stepMessage(request: CloudStepRequest, offset: number, ids: number[], sources: ReturnType<typeof toWireSources>): NonNullable<RouteRequest['step']> {
  return {
    offset,
    ids,
    sources,
    tokenIndex: request.tokenIndex,
    maxTokens: request.maxTokens,
    routerScore: request.routerScore,
    threshold: request.threshold,
    ...(request.hiddenState ? { slmHiddenState: Array.from(request.hiddenState) } : {}),
  };
}

function toReply(result: StepResult__Output): CloudStepReply {
  return {
    tokens: result.ids,
    text: result.text,
    logprobs: result.logprobs,
    topAlternatives: result.top.map((alts) => alts.ids.map((id, i) => ({ id, logprob: alts.logprobs[i] ?? Number.NaN }))),
    cachedTokens: result.cachedTokens,
    backendMs: result.backendMs,
    shimMs: result.shimMs,
  };
}
