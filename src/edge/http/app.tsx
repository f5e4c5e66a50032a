/** @jsxImportSource hono/jsx */
/**
 * The edge's web page and HTTP API (Hono). Pages and htmx fragments for people on the LAN; an SSE
 * JSON API and an OpenAI-compatible API (`/v1`) for programs; a chat page (chat-routes.tsx) where the pack has a chat template; health, readiness and Prometheus metrics for operations. Generation itself is
 * the runtime's; this file only parses, streams and serializes.
 *
 * @example
 * const app = createEdgeApp(runtime, { accessToken: undefined, maxBodyBytes: 65536 });
 * const res = await app.request('/healthz');
 */
import { basename } from 'node:path';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { SpecialTokensInMessages } from '../../shared/text/chat-template.ts';
import type { Logger } from '../../shared/process/logger.ts';
import { AppError, errorMessage, isAppError, type ErrorCode } from '../../shared/errors.ts';
import { GeneratePage } from '../../../views/generate-page.tsx';
import { routerAbout } from './router-about.ts';
import { UnauthorizedPage } from '../../../views/unauthorized-page.tsx';
import { RefusedTurn } from '../../../views/chat-fragments.tsx';
import { CloudState, EndStatus, ErrorMessage, RunPanel } from '../../../views/run-fragments.tsx';
import type { GenerationEvent } from '../loop/decoder-loop.ts';
import type { EdgeRuntime } from '../edge-runtime.ts';
import { readGenerationRequest } from '../request/generation-request-fields.ts';
import { EdgeChat } from '../chat/edge-chat.ts';
import { startFromBody } from './start-from-body.ts';
import { tokenizeRoutes } from './tokenize-routes.ts';
import { chatRoutes } from './chat-routes.tsx';
import { accessTokenGuard, AUTHENTICATE_CHALLENGE, hasAccessToken, pathOnThisBox } from './access-token.ts';
import { assets } from './assets.ts';
import { httpStatus } from './http-errors.ts';
import { createOpenAIRoutes } from './openai/openai-routes.ts';
import { streamPageRun } from './page-run-stream.tsx';
import { PendingRuns } from './pending-runs.ts';
import { readForm, readJsonOrForm } from './request-body.ts';
import { snakeCaseJson, snakeCaseKeys } from './snake-case-json.ts';

export interface EdgeAppOptions {
  /** When set, every page and API call needs it (see access-token.ts). */
  accessToken?: string;
  /** Largest request body; a bigger prompt is refused before it is read whole. */
  maxBodyBytes: number;
  /** Whether the engine is loaded and serving (readiness). */
  ready?: () => boolean;
  /** What special-token text inside a chat message becomes; `text` when not given. */
  chatSpecialTokens?: SpecialTokensInMessages;
  /** The edge's chat (its template); the pack's own when not given. */
  chat?: EdgeChat;
  /** The model's name in the APIs; the edge pack's folder name when not given. */
  modelName?: string;
  /** Where an internal error (a 500: a bug) is written; a refusal of bad input is the client's business and is not. */
  log?: Logger;
}

/** The JSON APIs (/api/..., /tokenize, /detokenize): every error they answer is JSON, never the page's HTML. */
const JSON_API = /^\/(api\/|(de)?tokenize(\/|$))/;
const isApi = (c: Context) => JSON_API.test(c.req.path);
/** The methods the page's and the APIs' routes serve. */
const SERVED_METHODS = new Set(['GET', 'HEAD', 'POST']);
/** A request htmx made for a fragment: it gets a fragment back, never a whole page. */
const isFragment = (c: Context) => c.req.header('hx-request') === 'true';

export function createEdgeApp(runtime: EdgeRuntime, options: EdgeAppOptions): Hono {
  const app = new Hono();
  const pending = new PendingRuns(runtime);
  const modelName = options.modelName ?? basename(runtime.engine.edgeModel.pack.dir);
  const chat = options.chat ?? EdgeChat.load(runtime.engine.tokenizer, { specialTokens: options.chatSpecialTokens, modelName });

  /**
   * An error as the API (JSON) or the page (a fragment) shows it. A 401 says which scheme it wants
   * (RFC 7235), and a browser opening a page without the token gets a page to type it into.
   */
  const errorResponse = (c: Context, code: ErrorCode, message: string, status: ContentfulStatusCode) => {
    if (code === 'UNAUTHENTICATED') c.header('www-authenticate', AUTHENTICATE_CHALLENGE);
    if (isApi(c)) return c.json({ error: { code, message } }, status);
    if (code === 'UNAUTHENTICATED' && c.req.method === 'GET' && !isFragment(c)) {
      return c.html(<UnauthorizedPage path={pathOnThisBox(c.req.path)} retried={c.req.query('token') !== undefined} />, status);
    }
    return c.html(<ErrorMessage message={message} />, status);
  };

  app.onError((err, c) => {
    if (isAppError(err)) return errorResponse(c, err.code, err.message, httpStatus(err.code));
    options.log?.error('internal error', { method: c.req.method, path: c.req.path, error: errorMessage(err) });
    return errorResponse(c, 'INTERNAL', `internal error: ${errorMessage(err)}`, 500);
  });
  app.notFound((c) => {
    // A method no route serves anywhere is one the edge does not implement (RFC 9110 § 15.6.2). Names Bun's parser
    // does not know (BREW, a lowercase get) never get here: it closes their connection without a reply.
    if (!SERVED_METHODS.has(c.req.method)) return errorResponse(c, 'UNIMPLEMENTED', `the edge serves GET, HEAD and POST, not ${c.req.method}`, 501);
    return isApi(c) ? c.json({ error: { code: 'NOT_FOUND', message: 'no such endpoint' } }, 404) : c.text('not found', 404);
  });

  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', (c) => {
    const ready = options.ready?.() ?? true;
    // Open, for probes; the cloud state and the active count only with the token: they tell anyone on the LAN when the edge is used.
    const reason = runtime.cloudReason();
    const details = hasAccessToken(c, options.accessToken)
      ? { cloud: runtime.cloudState(), ...(reason ? { cloud_reason: reason } : {}), active: runtime.activeCount }
      : {};
    return c.json({ ready, ...details }, ready ? 200 : 503);
  });
  // Open with a token set: the 401 page needs its style and icon.
  app.route('/assets', assets);
  // Before the page's guard and body limit: the OpenAI API applies its own, with OpenAI's error shape.
  app.route('/v1', createOpenAIRoutes(runtime, { accessToken: options.accessToken, maxBodyBytes: options.maxBodyBytes, chat, modelName, log: options.log }));

  app.use('*', accessTokenGuard(options.accessToken));
  // Behind the token: the counters tell anyone on the LAN when and how much the edge is used, and
  // Prometheus sends a bearer token with `authorization: { credentials: ... }` in its scrape config.
  app.get('/metrics', async (c) => c.body(await runtime.metrics.registry.metrics(), 200, { 'content-type': runtime.metrics.registry.contentType }));
  app.use(
    '*',
    bodyLimit({
      maxSize: options.maxBodyBytes,
      // RESOURCE_EXHAUSTED, as gRPC names a message above its limit; HTTP has a status of its own for it.
      onError: (c) =>
        // The chat refuses a message in its place among the turns, as it refuses any other (chat-routes.tsx); the body is never read, so the refusal cannot repeat the message.
        c.req.path === '/chat/turns'
          ? c.html(
              <RefusedTurn message="" error={`the message is too long: the edge takes at most ${options.maxBodyBytes} bytes a message, settings included`} />,
              413,
            )
          : errorResponse(c, 'RESOURCE_EXHAUSTED', `request body is larger than ${options.maxBodyBytes} bytes`, 413),
    }),
  );

  // The router pack's own τ (router.json's default_threshold), the same one a request without a threshold gets.
  const defaults = {
    threshold: runtime.engine.router.info.defaultThreshold,
    maxNewTokens: 64,
    maxNewTokensLimit: runtime.limits.maxNewTokens,
    speculate: runtime.engine.speculation?.byDefault ?? false,
    budget: runtime.limits.defaultBudget ?? {},
    executionProviders: runtime.engine.edgeModel.executionProviders,
    privateDetectKinds: runtime.engine.privateDetector?.knownKinds ?? [],
    router: routerAbout(runtime.engine.router.info),
  };
  app.get('/', (c) => c.html(<GeneratePage defaults={defaults} compare={false} chat={chat.available} />));
  app.get('/compare', (c) => c.html(<GeneratePage defaults={defaults} compare={true} chat={chat.available} />));
  app.route('/', chatRoutes({ runtime, chat, pending, defaults }));
  app.get('/fragments/cloud-state', (c) => c.html(<CloudState state={runtime.cloudState()} reason={runtime.cloudReason()} />));

  app.post('/runs', async (c) => {
    const run = await pending.add(readGenerationRequest(await readForm(c), 'form'));
    return c.html(<RunPanel id={run.id} request={run.request} title={run.request.mode} />);
  });
  app.post('/compare', async (c) => {
    const raw = readGenerationRequest(await readForm(c), 'form');
    const edgeOnly = await pending.add({ ...raw, mode: 'small_only' });
    // One side after the other: run together, each side's timings would include the other's load on
    // the same cores, and the comparison is about those timings.
    const joint = await pending.add({ ...raw, mode: 'joint' }, { after: edgeOnly });
    return c.html(
      <>
        <RunPanel id={edgeOnly.id} request={edgeOnly.request} title="small_only (edge alone)" />
        <RunPanel id={joint.id} request={joint.request} title="joint (edge + cloud)" waitingFor="small_only" />
      </>,
    );
  });
  app.post('/runs/:id/stop', (c) => {
    const id = c.req.param('id');
    if (!pending.stop(id) && !runtime.stop(id)) throw new AppError('NOT_FOUND', `no running generation ${id}`);
    return c.body(null, 204);
  });
  app.get('/runs/:id/events', (c) => {
    const id = c.req.param('id');
    const run = pending.take(id);
    return streamSSE(c, async (stream) => {
      if (!run) {
        // A reconnect after the run ended, or an unknown id: end cleanly so the browser stops retrying.
        await stream.writeSSE({ event: 'end', data: String(<EndStatus id={id} error="this generation is no longer running" />) });
        return;
      }
      try {
        await streamPageRun(stream, runtime, run, AbortSignal.any([abortOn(stream), run.stopped]));
      } finally {
        pending.end(run.id);
      }
    });
  });

  app.post('/api/generate', async (c) => {
    const { body, encoding } = await readJsonOrForm(c);
    const run = await startFromBody(runtime, chat, body, encoding);
    return streamSSE(c, async (stream) => {
      await streamRunAsJson(stream, run.events(abortOn(stream)));
    });
  });
  const { defaultBudget = {}, ...limits } = runtime.limits;
  app.route('/', tokenizeRoutes(runtime, chat, modelName));
  app.get('/api/info', (c) =>
    c.json(
      snakeCaseKeys({
        // Folder names only: the device's directory layout is nobody's business on the LAN.
        slm: basename(runtime.engine.edgeModel.pack.dir),
        // onnxruntime's providers for the edge model, in order of preference, after any start-up fallback.
        executionProviders: runtime.engine.edgeModel.executionProviders,
        router: runtime.engine.router.info.name,
        cloud: runtime.cloudState(),
        // What differs, while the cloud is `mismatch`.
        cloudReason: runtime.cloudReason(),
        limits,
        // The --route-* budgets under the request fields' names: what a request naming neither τ nor a budget gets.
        defaultBudget,
      }),
    ),
  );

  return app;
}

/** An AbortSignal that fires when the client goes away. */
function abortOn(stream: SSEStreamingApi): AbortSignal {
  const controller = new AbortController();
  stream.onAbort(() => controller.abort());
  return controller.signal;
}

/**
 * The API's stream: `token` and `done` events with JSON data, their fields in snake_case like the request's;
 * a failure is an `error` event, then the end.
 */
async function streamRunAsJson(stream: SSEStreamingApi, events: AsyncGenerator<GenerationEvent>): Promise<void> {
  try {
    for await (const event of events) await stream.writeSSE({ event: event.type, data: snakeCaseJson(event) });
  } catch (e) {
    const code = isAppError(e) ? e.code : 'INTERNAL';
    await stream.writeSSE({ event: 'error', data: snakeCaseJson({ type: 'error', code, message: errorMessage(e) }) });
  }
}
