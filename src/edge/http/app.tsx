/** @jsxImportSource hono/jsx */
/**
 * The edge's web page and HTTP API (Hono). Pages and htmx fragments for people on the LAN; an SSE
 * JSON API for programs; health, readiness and Prometheus metrics for operations. Generation itself is
 * the runtime's; this file only parses, streams and serializes.
 *
 * @example
 * const app = createEdgeApp(runtime, { accessToken: undefined, maxBodyBytes: 65536 });
 * const res = await app.request('/healthz');
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { AppError, errorMessage, isAppError, type ErrorCode } from '../../shared/errors.ts';
import { GeneratePage } from '../../../views/generate-page.tsx';
import { CloudState, EndStatus, ErrorMessage, MetricsPanel, RunPanel, TokenSpan } from '../../../views/run-fragments.tsx';
import type { GenerationEvent } from '../decoder-loop.ts';
import type { EdgeRuntime } from '../edge-runtime.ts';
import type { RawGenerationRequest } from '../generation-request.ts';
import { accessTokenGuard } from './access-token.ts';
import { assets } from './assets.ts';
import { httpStatus } from './http-errors.ts';
import { PendingRuns } from './pending-runs.ts';
import { readForm, readJsonObject } from './request-body.ts';

export interface EdgeAppOptions {
  /** When set, every page and API call needs it (see access-token.ts). */
  accessToken?: string;
  /** Largest request body; a bigger prompt is refused before it is read whole. */
  maxBodyBytes: number;
  /** Whether the engine is loaded and serving (readiness). */
  ready?: () => boolean;
}

const FORM_FIELDS = ['prompt', 'mode', 'threshold', 'maxNewTokens', 'temperature', 'topP', 'seed', 'stop', 'routeSpan', 'speculate'] as const;

function formRequest(body: Record<string, unknown>): RawGenerationRequest {
  const raw: Record<string, unknown> = {};
  for (const f of FORM_FIELDS) if (body[f] !== undefined) raw[f] = body[f];
  return raw;
}

const isApi = (c: Context) => c.req.path.startsWith('/api/');

export function createEdgeApp(runtime: EdgeRuntime, options: EdgeAppOptions): Hono {
  const app = new Hono();
  const pending = new PendingRuns(runtime);

  /** An error as the API (JSON) or the page (a fragment) shows it. */
  const errorResponse = (c: Context, code: ErrorCode, message: string, status: ContentfulStatusCode) =>
    isApi(c) ? c.json({ error: { code, message } }, status) : c.html(<ErrorMessage message={message} />, status);

  app.onError((err, c) =>
    isAppError(err) ? errorResponse(c, err.code, err.message, httpStatus(err.code)) : errorResponse(c, 'INTERNAL', `internal error: ${errorMessage(err)}`, 500),
  );
  app.notFound((c) => (isApi(c) ? c.json({ error: { code: 'NOT_FOUND', message: 'no such endpoint' } }, 404) : c.text('not found', 404)));

  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', (c) => {
    const ready = options.ready?.() ?? true;
    return c.json({ ready, cloud: runtime.cloudState(), active: runtime.activeCount }, ready ? 200 : 503);
  });
  app.get('/metrics', async (c) => c.body(await runtime.metrics.registry.metrics(), 200, { 'content-type': runtime.metrics.registry.contentType }));
  app.route('/assets', assets);

  app.use('*', accessTokenGuard(options.accessToken));
  app.use(
    '*',
    bodyLimit({
      maxSize: options.maxBodyBytes,
      // RESOURCE_EXHAUSTED, as gRPC names a message above its limit; HTTP has a status of its own for it.
      onError: (c) => errorResponse(c, 'RESOURCE_EXHAUSTED', `request body is larger than ${options.maxBodyBytes} bytes`, 413),
    }),
  );

  const defaults = { threshold: 0.5, maxNewTokens: 64, maxNewTokensLimit: runtime.limits.maxNewTokens };
  app.get('/', (c) => c.html(<GeneratePage defaults={defaults} compare={false} />));
  app.get('/compare', (c) => c.html(<GeneratePage defaults={defaults} compare={true} />));
  app.get('/fragments/cloud-state', (c) => c.html(<CloudState state={runtime.cloudState()} />));

  app.post('/runs', async (c) => {
    const run = pending.add(formRequest(await readForm(c)));
    return c.html(<RunPanel id={run.id} request={run.request} title={run.request.mode} />);
  });
  app.post('/compare', async (c) => {
    const raw = formRequest(await readForm(c));
    const edgeOnly = pending.add({ ...raw, mode: 'small_only' });
    let joint;
    try {
      joint = pending.add({ ...raw, mode: 'joint' });
    } catch (e) {
      pending.cancel(edgeOnly.id);
      throw e;
    }
    return c.html(
      <>
        <RunPanel id={edgeOnly.id} request={edgeOnly.request} title="small_only (edge alone)" />
        <RunPanel id={joint.id} request={joint.request} title="joint (edge + cloud)" />
      </>,
    );
  });
  app.post('/runs/:id/stop', (c) => {
    const id = c.req.param('id');
    if (!pending.cancel(id) && !runtime.stop(id)) throw new AppError('NOT_FOUND', `no running generation ${id}`);
    return c.body(null, 204);
  });
  app.get('/runs/:id/events', (c) => {
    const run = pending.take(c.req.param('id'));
    return streamSSE(c, async (stream) => {
      if (!run) {
        // A reconnect after the run ended, or an unknown id: end cleanly so the browser stops retrying.
        await stream.writeSSE({ event: 'end', data: String(<EndStatus id={c.req.param('id')} error="this generation is no longer running" />) });
        return;
      }
      await streamRunAsHtml(stream, run.id, run.events(abortOn(stream)));
    });
  });

  app.post('/api/generate', async (c) => {
    const run = runtime.start((await readJsonObject(c)) as RawGenerationRequest);
    return streamSSE(c, async (stream) => {
      await streamRunAsJson(stream, run.events(abortOn(stream)));
    });
  });
  app.get('/api/info', (c) =>
    c.json({
      slm: runtime.engine.slm.pack.dir,
      router: runtime.engine.router.info.name,
      cloud: runtime.cloudState(),
      limits: runtime.limits,
    }),
  );

  return app;
}

/** An AbortSignal that fires when the client goes away. */
function abortOn(stream: SSEStreamingApi): AbortSignal {
  const controller = new AbortController();
  stream.onAbort(() => controller.abort());
  return controller.signal;
}

async function streamRunAsHtml(stream: SSEStreamingApi, id: string, events: AsyncGenerator<GenerationEvent>): Promise<void> {
  try {
    for await (const event of events) {
      if (event.type === 'token') {
        await stream.writeSSE({ event: 'token', data: String(<TokenSpan event={event} />) });
      } else {
        await stream.writeSSE({ event: 'metrics', data: String(<MetricsPanel metrics={event.metrics} />) });
        await stream.writeSSE({ event: 'end', data: String(<EndStatus id={id} done={event} />) });
      }
    }
  } catch (e) {
    await stream.writeSSE({ event: 'end', data: String(<EndStatus id={id} error={errorMessage(e)} />) });
  }
}

/** The API's stream: `token` and `done` events with JSON data; a failure is an `error` event, then the end. */
async function streamRunAsJson(stream: SSEStreamingApi, events: AsyncGenerator<GenerationEvent>): Promise<void> {
  try {
    for await (const event of events) await stream.writeSSE({ event: event.type, data: JSON.stringify(event) });
  } catch (e) {
    const code = isAppError(e) ? e.code : 'INTERNAL';
    await stream.writeSSE({ event: 'error', data: JSON.stringify({ type: 'error', code, message: errorMessage(e) }) });
  }
}
