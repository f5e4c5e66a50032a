/**
 * The CloudClient the edge uses in production: the cloud shim over gRPC. This file holds the channel, the
 * circuit breaker and the health probe; each conversation is a GrpcCloudConversation (grpc-cloud-conversation.ts:
 * one Route stream at a time, steps carrying context deltas as context-delta.ts builds them).
 * The channel is created at the first routed token. Repeated transport failures (or one missed deadline)
 * open a circuit with exponential backoff (see CloudBackoff), during which steps fail at once with
 * UNAVAILABLE (the decoding loop then falls back to the edge model); the channel's own reconnection follows
 * the same delays. While the breaker holds failures, the shim's gRPC health service is probed on the same
 * schedule (see CloudHealthProbe), so a shim that came back shows `ready` again without a routed token.
 * Given the edge model's tokenizer fingerprint, it routes nothing to a shim whose tokenizer differs (state
 * `mismatch`, see VocabularyAgreement): the shim's Describe answer and every session's `opened` say which it has.
 *
 * @example
 * const cloud = new GrpcCloudClient({ address: 'cloud.example:50061', authToken, tls: { caFile: 'ca.pem' } });
 * const conversation = cloud.openConversation({ requestId: 'r1', routingKey: 'chat-42', signal });
 * const reply = await conversation.next(stepRequest);
 * await conversation.close(); await cloud.close();
 */
import { connectivityState, Metadata, status, type ChannelOptions } from '@grpc/grpc-js';
import { AppError } from '../../shared/errors.ts';
import { bearer } from '../../shared/grpc/auth.ts';
import { appErrorCode, toAppError } from '../../shared/grpc/errors.ts';
import {
  CLOUD_ROUTER_SERVICE_NAME,
  CloudRouterClient,
  HealthClient,
  type CloudRouterClientType,
  type HealthClientType,
  type SessionOpened__Output,
} from '../../shared/grpc/proto.ts';
import { clientTls, type ClientTlsFiles } from '../../shared/grpc/tls.ts';
import { fromWireFingerprint } from '../../shared/grpc/wire.ts';
import type { TokenizerFingerprint } from '../../shared/text/tokenizer-fingerprint.ts';
import { CloudBackoff } from './cloud-backoff.ts';
import { CloudHealthProbe, realProbeClock, type ProbeClock } from './cloud-health-probe.ts';
import type { CloudClient, CloudConnectionState, CloudConversation, ConversationOptions } from './cloud-client.ts';
import { CREDENTIAL_REFUSALS, GrpcCloudConversation, type RouteStream, type RouteStreamHost, type StepFailure } from './grpc-cloud-conversation.ts';
import { RoutingKeyHash } from './routing-key-hash.ts';
import { VocabularyAgreement } from './vocabulary-agreement.ts';

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
  /** Key of the HMAC that turns a conversation into the routing key sent (routing-key-hash.ts); default random. */
  routingKeySecret?: string;
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
  /**
   * The edge model's tokenizer (tokenizerFingerprint of its pack): a shim that reports another gets no step.
   * Absent: nothing is compared.
   */
  edgeTokenizer?: TokenizerFingerprint;
  /** The breaker's clock and the probe's timers (tests inject one; default performance.now, unref'd timers). */
  clock?: ProbeClock;
}

export class GrpcCloudClient implements CloudClient, RouteStreamHost {
  readonly backoff: CloudBackoff;
  readonly probe: CloudHealthProbe;
  readonly vocabulary: VocabularyAgreement;
  private client: CloudRouterClientType | undefined;
  private health: HealthClientType | undefined;
  private readonly conversations = new Set<GrpcCloudConversation>();
  private closed = false;
  /** The shim turned down our credentials, and no step has been answered since. */
  private credentialsRefused = false;
  private readonly routingKeys: RoutingKeyHash;

  constructor(readonly options: GrpcCloudClientOptions) {
    const { initialMs = 250, maxMs = 10_000, failureThreshold } = options.backoff ?? {};
    const clock = options.clock ?? realProbeClock;
    this.backoff = new CloudBackoff({ initialMs, maxMs, failureThreshold }, () => clock.now());
    this.probe = new CloudHealthProbe(this.backoff, (signal) => this.checkHealth(signal), clock);
    this.routingKeys = new RoutingKeyHash(options.routingKeySecret);
    // A mismatched shim is asked again at the breaker's longest delay: a restart with the right pack is rare.
    this.vocabulary = new VocabularyAgreement(options.edgeTokenizer, () => this.describeTokenizer(), clock, maxMs);
  }

  openConversation(options: ConversationOptions): CloudConversation {
    if (this.closed) throw new AppError('FAILED_PRECONDITION', 'the cloud client is closed');
    // The caller's conversation name stays on the box: the shim reads a key derived from it.
    const routingKey = options.routingKey === undefined ? undefined : this.routingKeys.of(options.routingKey);
    const conversation = new GrpcCloudConversation(this, { ...options, routingKey });
    this.conversations.add(conversation);
    return conversation;
  }

  get stepTimeoutMs(): number {
    return this.options.stepTimeoutMs ?? 10_000;
  }

  get closeTimeoutMs(): number {
    return this.options.closeTimeoutMs ?? 2_000;
  }

  state(): CloudConnectionState {
    if (this.credentialsRefused) return 'refused';
    if (this.vocabulary.verdict === 'mismatch') return 'mismatch';
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

  /** Why the state is what it is, where it takes words: what differs, while `mismatch`. */
  stateReason(): string | undefined {
    return this.state() === 'mismatch' ? this.vocabulary.reason : undefined;
  }

  async roundTrip(): Promise<number> {
    const started = performance.now();
    const serving = await this.checkHealth(AbortSignal.timeout(this.stepTimeoutMs));
    if (!serving) throw new AppError('UNAVAILABLE', 'the shim is not serving');
    return performance.now() - started;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.probe.close();
    this.vocabulary.close();
    await Promise.allSettled([...this.conversations].map((c) => c.close()));
    // The health client shares the router client's channel: closing that one closes both.
    this.client?.close();
    this.client = undefined;
    this.health = undefined;
  }

  /**
   * Opens a Route stream and ends it at once, with nothing sent: the shim checks the token when a stream
   * opens and answers an empty one with OK, so this tells a refused token apart without a session. The
   * health service cannot: it is open to all. Resolves the state it leaves; a transport failure rejects.
   */
  async checkCredentials(): Promise<CloudConnectionState> {
    const stream = this.startStream();
    await new Promise<void>((resolve, reject) => {
      stream.on('data', () => {});
      stream.on('status', (status: { code: number; details: string }) =>
        status.code === 0 ? resolve() : reject(new AppError(appErrorCode(status.code), status.details)),
      );
      stream.on('error', () => {});
      stream.end();
    }).then(
      () => (this.credentialsRefused = false),
      (e: AppError) => {
        if (CREDENTIAL_REFUSALS.has(e.code)) this.credentialsRefused = true;
        else throw e;
      },
    );
    return this.state();
  }

  /**
   * Asks the shim which tokenizer it has (Describe) and compares it with the edge model's: the start-up check,
   * so that /readyz says `mismatch` before any token is routed. Resolves the state it leaves; a transport
   * failure rejects (each session's `opened` still says it).
   */
  async checkVocabulary(): Promise<CloudConnectionState> {
    await this.vocabulary.check();
    return this.state();
  }

  /** @internal the shim opened a session: its tokenizer must be the edge model's, or the stream is refused. */
  sessionOpened(opened: SessionOpened__Output): void {
    const mismatch = this.vocabulary.judge(fromWireFingerprint(opened.tokenizer));
    if (!mismatch) return;
    // Refused without an answer, like a breaker refusal: a probe slot this stream held is given back.
    this.backoff.abandon();
    throw mismatch;
  }

  /** @internal the breaker's mark, taken when a step starts (CloudBackoff.mark). */
  failureMark(): number {
    return this.backoff.mark();
  }

  /** @internal a step was answered: the breaker closes, and the credentials are evidently good. */
  stepSucceeded(): void {
    this.credentialsRefused = false;
    this.backoff.success();
  }

  /** @internal a step failed or was abandoned: the breaker counts it, and the probe follows its new schedule. */
  stepFailed(failure: StepFailure, since?: number): void {
    if (failure === 'refused') this.credentialsRefused = true;
    if (failure === 'abandoned' || failure === 'refused') this.backoff.abandon();
    else this.backoff.failure(failure, since);
    if (this.options.healthProbe !== false) this.probe.schedule();
  }

  /** The shim's tokenizer by Describe: undefined from a shim without one, or one older than the call (UNIMPLEMENTED). */
  private describeTokenizer(): Promise<TokenizerFingerprint | undefined> {
    if (this.closed) return Promise.reject(new AppError('FAILED_PRECONDITION', 'the cloud client is closed'));
    return new Promise((resolve, reject) => {
      this.connection().Describe({}, this.metadata(), { deadline: Date.now() + this.stepTimeoutMs }, (error, reply) => {
        if (!error) return resolve(fromWireFingerprint(reply?.tokenizer));
        if (error.code === status.UNIMPLEMENTED) return resolve(undefined);
        reject(toAppError(error));
      });
    });
  }

  /** Asks the shim's health service about the CloudRouter, on the routing channel, under the step deadline. */
  private checkHealth(signal: AbortSignal): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    this.connection();
    const ms = this.stepTimeoutMs;
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
    const mismatch = this.vocabulary.refusal();
    if (mismatch) throw mismatch;
    this.backoff.check();
    return this.connection().Route(this.metadata(), { deadline: Date.now() + (this.options.sessionTimeoutMs ?? 30 * 60_000) });
  }

  /** The call's credentials: the bearer token, when there is one. */
  private metadata(): Metadata {
    const metadata = new Metadata();
    if (this.options.authToken) metadata.set('authorization', bearer(this.options.authToken));
    return metadata;
  }

  /** @internal */
  forget(conversation: GrpcCloudConversation): void {
    this.conversations.delete(conversation);
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
