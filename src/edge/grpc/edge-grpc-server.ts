/**
 * The edge's gRPC server: `EdgeGenerator.Generate` streams the same events as the web page, and the
 * standard health service reports readiness. A client that cancels (or whose deadline passes) stops the
 * generation; the edge's access token, when set, is required as `authorization: Bearer <token>`.
 */
import { basename } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { AppError, errorMessage, isAppError } from '../../shared/errors.ts';
import { shortestFloat32 } from '../../shared/model/float32.ts';
import { checkBearer } from '../../shared/grpc/auth.ts';
import { toGrpcStatus } from '../../shared/grpc/errors.ts';
import { HealthService } from '../../shared/grpc/health.ts';
import { healthService } from '../../shared/grpc/proto.ts';
import { assertWellFormed, strictService } from '../../shared/grpc/strict-decode.ts';
import type { GenerationEvent } from '../loop/decoder-loop.ts';
import type { EdgeRuntime } from '../edge-runtime.ts';
import type { RawGenerationRequest } from '../request/generation-request.ts';
import { readGenerationRequest } from '../request/generation-request-fields.ts';
import { readChatMessages } from '../chat/chat-messages.ts';
import { EdgeChat } from '../chat/edge-chat.ts';
import {
  EDGE_GENERATOR_SERVICE_NAME,
  type EdgeGeneratorHandlers,
  type GenerateEvent,
  type GenerateRequest__Output,
  type PrivateSpan__Output,
} from './edge-proto.ts';

export interface EdgeGrpcOptions {
  host: string;
  port: number;
  accessToken?: string;
  /** Largest request message; bigger ones are refused by grpc-js with RESOURCE_EXHAUSTED. */
  maxReceiveBytes: number;
  /** The edge's chat, for requests that send `messages`; the pack's own template when not given. */
  chat?: EdgeChat;
}

/** A `float` field as the decimal its sender wrote (float32.ts): τ 0.8, not 0.800000011920929. */
function floatField(value: number | null | undefined): number | null | undefined {
  return typeof value === 'number' ? shortestFloat32(value) : value;
}

/** The message under the documented names (the proto's own), read by the schema the HTTP API uses. */
function toRawRequest(r: GenerateRequest__Output): RawGenerationRequest {
  return readGenerationRequest(
    {
      prompt: r.prompt,
      // proto3 has no unset string: an empty mode means the default.
      mode: r.mode === '' ? undefined : r.mode,
      threshold: floatField(r.threshold),
      max_new_tokens: r.maxNewTokens,
      temperature: floatField(r.temperature),
      top_p: floatField(r.topP),
      seed: r.seed,
      stop: r.stop,
      route_span: r.routeSpan,
      speculate: r.speculate,
      conversation: r.conversation,
      route_share: r.routeShare,
      route_tokens_per_minute: r.routeTokensPerMinute,
      route_wait_ms: r.routeWaitMs,
      // proto3 has no unset list: an empty one is none.
      private_spans: r.privateSpans.length > 0 ? r.privateSpans.map(wireSpan) : undefined,
      private_detect: r.privateDetect.length > 0 ? r.privateDetect : undefined,
      json_schema: r.jsonSchema,
      grammar: r.grammar,
      regex: r.regex,
      choice: r.choice.length > 0 ? r.choice : undefined,
    },
    'typed',
  );
}

function wireSpan({ start, end, kind }: PrivateSpan__Output): { start: number; end: number; kind?: string } {
  return { start, end, ...(kind ? { kind } : {}) };
}

export function toWireEvent(event: GenerationEvent): GenerateEvent {
  if (event.type === 'token') {
    const { type: _type, score, cloudError, ...token } = event;
    return { token: { ...token, ...(score === null ? {} : { score }), cloudError: cloudError ?? '' } };
  }
  const { type: _type, ...done } = event;
  return { done };
}

export class EdgeGrpcServer {
  private readonly server: grpc.Server;
  private readonly chat: EdgeChat;
  readonly health = new HealthService({ '': 'NOT_SERVING', [EDGE_GENERATOR_SERVICE_NAME]: 'NOT_SERVING' });
  port = 0;

  constructor(
    private readonly runtime: EdgeRuntime,
    private readonly options: EdgeGrpcOptions,
  ) {
    this.chat = options.chat ?? EdgeChat.load(runtime.engine.tokenizer, { modelName: basename(runtime.engine.edgeModel.pack.dir) });
    this.server = new grpc.Server({ 'grpc.max_receive_message_length': options.maxReceiveBytes });
    const handlers: EdgeGeneratorHandlers = { Generate: (call) => void this.generate(call) };
    // Strict decoding: malformed bytes and invalid UTF-8 are INVALID_ARGUMENT, not INTERNAL or U+FFFD.
    this.server.addService(strictService('edge_generator.proto', EDGE_GENERATOR_SERVICE_NAME), handlers);
    this.server.addService(healthService, this.health.handlers);
  }

  async start(): Promise<number> {
    this.port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync(`${this.options.host}:${this.options.port}`, grpc.ServerCredentials.createInsecure(), (err, port) =>
        err ? reject(new AppError('UNAVAILABLE', `cannot listen on ${this.options.host}:${this.options.port}: ${err.message}`)) : resolve(port),
      ),
    );
    this.health.set('', 'SERVING');
    this.health.set(EDGE_GENERATOR_SERVICE_NAME, 'SERVING');
    return this.port;
  }

  private async generate(call: grpc.ServerWritableStream<GenerateRequest__Output, GenerateEvent>): Promise<void> {
    let run;
    try {
      checkBearer(call.metadata, this.options.accessToken || undefined);
      assertWellFormed(call.request);
      run = await this.startRun(call.request);
    } catch (e) {
      call.emit('error', toGrpcStatus(e));
      return;
    }
    const controller = new AbortController();
    call.on('cancelled', () => controller.abort());
    try {
      for await (const event of run.events(controller.signal)) {
        if (call.cancelled) continue; // drain quickly: the loop sees the abort at its next step
        call.write(toWireEvent(event));
      }
      call.end();
    } catch (e) {
      if (call.cancelled) return;
      const code = isAppError(e) ? e.code : 'INTERNAL';
      call.write({ error: { code, message: errorMessage(e) } });
      call.emit('error', toGrpcStatus(e));
    }
  }

  /** A prompt's generation, or a conversation's through the chat template: exactly one of the two. */
  private async startRun(request: GenerateRequest__Output): ReturnType<EdgeRuntime['begin']> {
    if (request.messages.length === 0) return this.runtime.begin(toRawRequest(request));
    if (request.prompt !== '') throw new AppError('INVALID_ARGUMENT', 'give either prompt or messages, not both');
    const messages = readChatMessages(
      request.messages.map(({ role, content, privateSpans }) => ({
        role,
        content,
        ...(privateSpans.length > 0 ? { private_spans: privateSpans.map(wireSpan) } : {}),
      })),
    );
    return this.chat.start(this.runtime, messages, toRawRequest(request));
  }

  /** Stops accepting calls, lets running streams finish with their final event, then closes. */
  async shutdown(graceMs = 5000): Promise<void> {
    this.health.shutdown();
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, graceMs);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }
}
