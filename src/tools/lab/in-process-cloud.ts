/**
 * A CloudClient that runs the cloud in this process with the product's own code at both ends: the edge
 * side is GrpcCloudConversation (the context-delta protocol, the resend rule, pipelined conditional steps),
 * the cloud side is the shim's `routeSession` core over a SessionStore and the EmbeddedBackend on the cloud
 * model, and only the socket is replaced, by an in-memory stream that still serializes every message with
 * the proto (cloud/sessions/in-memory-route.ts). So the evaluation, the router's on-policy rounds and the loop tests
 * measure the cloud path the system runs: the shim's skip rule, sampling mapping, step validation and reply
 * text. There is no circuit breaker: it guards a user's wait against a dead network shim, and an evaluation
 * must not quietly turn routed tokens into edge tokens.
 *
 * @example
 * const cloud = new InProcessCloud(await DecoderModel.load(loadModelPack('models/stories260k')), { record: false, tokenizer });
 * for await (const event of generate({ edgeModel, router, tokenizer, cloud }, request)) ...
 * await cloud.close();
 */
import { randomUUID } from 'node:crypto';
import { shimConfig } from '../../cloud/config.ts';
import { EmbeddedBackend } from '../../cloud/backends/embedded-backend.ts';
import { openInMemoryRoute } from '../../cloud/sessions/in-memory-route.ts';
import type { ShimContext } from '../../cloud/sessions/route-session.ts';
import { SessionStore } from '../../cloud/sessions/session-store.ts';
import { StepAdmission } from '../../cloud/admission/step-admission.ts';
import type { CloudClient, CloudConversation, CloudStepReply, CloudStepRequest, ConversationOptions } from '../../edge/cloud/cloud-client.ts';
import { GrpcCloudConversation, type RouteStreamHost } from '../../edge/cloud/grpc-cloud-conversation.ts';
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import { silentLogger } from '../../shared/process/logger.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';

export interface InProcessCloudOptions {
  /** Keep a copy of every step request in `requests` (for tests; default true). */
  record?: boolean;
  /** Ids the tokenizer knows: sampling never picks a padding row of the embedding beyond them. */
  tokenVocabSize?: number;
  /** Turns reply ids into reply text, as the shim's `--model-pack` tokenizer does; without it replies carry no text. */
  tokenizer?: TextTokenizer;
  /**
   * Deadline of one step (default 10 min). Only onnxruntime runs behind it, on a machine the evaluation may
   * share with other jobs: the product's 10 s would turn a busy moment into edge fallback tokens.
   */
  stepTimeoutMs?: number;
}

/** Conversations end with their generation, so every one may keep its session and cache. */
const MAX_LIVE = 1 << 16;

export class InProcessCloud implements CloudClient {
  /** Every step request received, for assertions on what the edge sends (empty when not recording). */
  readonly requests: CloudStepRequest[] = [];
  openConversations = 0;
  /** Conditional steps answered `skipped` (their assumed token was not the previous step's). */
  skipped = 0;
  /** When set, `next` throws this error without reaching the cloud (an outage as the loop sees it). */
  failWith: Error | undefined;
  readonly backend: EmbeddedBackend;
  readonly store: SessionStore;
  private readonly record: boolean;
  private readonly host: RouteStreamHost;
  private readonly shutdown = new AbortController();

  constructor(model: DecoderModel, options: InProcessCloudOptions = {}) {
    this.record = options.record ?? true;
    const stepTimeoutMs = options.stepTimeoutMs ?? 10 * 60_000;
    this.backend = EmbeddedBackend.over(model, { maxLiveSequences: MAX_LIVE, tokenVocabSize: options.tokenVocabSize });
    // The shim's defaults, except what only a network shim serving many edges needs bounded.
    const config = shimConfig({
      maxSessions: MAX_LIVE,
      maxContextTokens: Number.MAX_SAFE_INTEGER,
      sessionIdleMs: stepTimeoutMs,
      backendTimeoutMs: stepTimeoutMs,
    });
    this.store = new SessionStore({ maxSessions: config.maxSessions, maxContextTokens: config.maxContextTokens, idleMs: config.sessionIdleMs });
    // As many backend calls at once as there may be sessions: a step is never refused as overloaded here.
    const admission = new StepAdmission(MAX_LIVE);
    const shim: ShimContext = { config, store: this.store, backend: this.backend, admission, tokenizer: options.tokenizer, log: silentLogger };
    this.host = {
      stepTimeoutMs,
      closeTimeoutMs: 2_000,
      startStream: () => {
        if (this.shutdown.signal.aborted) throw new AppError('FAILED_PRECONDITION', 'the in-process cloud is closed');
        return openInMemoryRoute(shim, this.shutdown.signal);
      },
      stepSucceeded() {},
      stepFailed() {},
      forget() {},
    };
  }

  openConversation(options: Partial<ConversationOptions> & Pick<ConversationOptions, 'gate'>): CloudConversation {
    const conversation = new GrpcCloudConversation(this.host, {
      gate: options.gate,
      requestId: options.requestId ?? randomUUID(),
      signal: options.signal,
      routingKey: options.routingKey,
      disclosure: options.disclosure,
    });
    this.openConversations++;
    let closed = false;
    return {
      next: async (request: CloudStepRequest): Promise<CloudStepReply> => {
        if (this.record) this.requests.push({ ...request, context: [...request.context], sources: [...request.sources] });
        if (this.failWith) throw this.failWith;
        const reply = await conversation.next(request);
        if (reply.skipped) this.skipped++;
        return reply;
      },
      prefill: (request: CloudStepRequest) => conversation.prefill(request),
      extend: (request: CloudStepRequest) => conversation.extend(request),
      close: async () => {
        if (!closed) this.openConversations--;
        closed = true;
        await conversation.close();
      },
    };
  }

  state() {
    return 'ready' as const;
  }

  /** Ends every stream and the session store; the model stays its owner's to release. */
  async close(): Promise<void> {
    const reason = new AppError('UNAVAILABLE', 'the in-process cloud is closed');
    this.shutdown.abort(reason);
    this.store.shutdown(reason);
  }
}
