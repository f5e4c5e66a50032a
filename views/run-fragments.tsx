/** @jsxImportSource hono/jsx */
/**
 * Fragments of a running generation. The run panel opens an SSE stream; the server then sends
 * `token` (one span), `metrics` (the panel) and finally `end` (status), which also closes the stream.
 */
import type { DoneEvent, TokenEvent } from '../src/edge/decoder-loop.ts';
import type { GenerationMetrics } from '../src/edge/generation-metrics.ts';
import type { GenerationRequest } from '../src/edge/generation-request.ts';

export function RunPanel(props: { id: string; request: GenerationRequest; title: string }) {
  const { id, request } = props;
  return (
    <article class="run" id={`run-${id}`} hx-ext="sse" sse-connect={`/runs/${id}/events`} sse-close="end">
      <div class="run-head">
        <h2>
          {props.title} <small class="legend">τ={request.threshold.toFixed(2)}</small>
        </h2>
        <button id={`stop-${id}`} class="secondary" type="button" hx-post={`/runs/${id}/stop`} hx-swap="none">
          Stop
        </button>
      </div>
      <p class="output" sse-swap="token" hx-swap="beforeend" data-testid="output">
        <span class="prompt">{request.prompt}</span>
      </p>
      <div class="status" sse-swap="end" hx-swap="innerHTML" role="status">
        generating…
      </div>
      <dl class="metrics" sse-swap="metrics" hx-swap="innerHTML" data-testid="metrics"></dl>
    </article>
  );
}

const SOURCE_LABEL = { slm: 'edge model', llm: 'cloud model', fallback: 'edge model (cloud unreachable)' } as const;

export function TokenSpan(props: { event: TokenEvent }) {
  const { event } = props;
  const score = event.score === null ? 'no router score' : `router score ${event.score.toFixed(3)}`;
  const why = event.cloudError ? ` · ${event.cloudError}` : '';
  return (
    <span class={`tok tok-${event.source}`} data-source={event.source} title={`${SOURCE_LABEL[event.source]} · ${score}${why}`}>
      {event.text}
    </span>
  );
}

const ms = (v: number) => `${v.toFixed(1)} ms`;

export function MetricsPanel(props: { metrics: GenerationMetrics }) {
  const m = props.metrics;
  const rows: [string, string, string][] = [
    ['Tokens', String(m.tokens), 'tokens'],
    ['Routed to cloud', `${m.routed} (${(m.routedRatio * 100).toFixed(1)}%)`, 'routed'],
    ['Fallback (cloud down)', String(m.fallback), 'fallback'],
    ['Time to first token', ms(m.ttftMs), 'ttft'],
    ['Time between tokens (edge, mean / p50 / p95)', `${ms(m.tbtMeanMs)} / ${ms(m.tbtP50Ms)} / ${ms(m.tbtP95Ms)}`, 'tbt'],
    ['Edge model time', ms(m.slmMs), 'slm'],
    ['Router time', ms(m.routerMs), 'router'],
    ['Communication + cloud model', ms(m.cloudMs), 'cloud'],
    [
      'Decoded ahead while waiting (hit rate, time saved, steps wasted)',
      m.speculated ? `${(m.hitRate * 100).toFixed(0)}% of ${m.speculated}, ${ms(m.savedMs)} saved, ${m.wastedSteps} wasted` : 'none',
      'speculation',
    ],
    ['Total', ms(m.totalMs), 'total'],
  ];
  return (
    <>
      {rows.map(([label, value, key]) => (
        <>
          <dt>{label}</dt>
          <dd data-metric={key} data-value={key === 'routed' ? String(m.routed) : undefined}>
            {value}
          </dd>
        </>
      ))}
    </>
  );
}

const FINISH_TEXT = {
  eos: 'finished (end of text)',
  stop: 'finished (stop string)',
  length: 'finished (max new tokens)',
  context: 'finished (context window full)',
  cancelled: 'stopped',
} as const;

/** The final status; also disables the Stop button out of band. */
export function EndStatus(props: { id: string; done?: DoneEvent; error?: string }) {
  return (
    <>
      {props.error ? (
        <span class="error" role="alert" data-finish="error">
          {props.error}
        </span>
      ) : (
        <span data-finish={props.done!.finishReason}>{FINISH_TEXT[props.done!.finishReason]}</span>
      )}
      <button id={`stop-${props.id}`} class="secondary" type="button" disabled hx-swap-oob="true">
        Stop
      </button>
    </>
  );
}

export function ErrorMessage(props: { message: string }) {
  return (
    <div class="error" role="alert">
      {props.message}
    </div>
  );
}

export function CloudState(props: { state: string }) {
  return <span class={`cloud-${props.state}`}>cloud: {props.state}</span>;
}
