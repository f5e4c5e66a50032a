/** @jsxImportSource hono/jsx */
/**
 * Fragments of a running generation. The run panel opens an SSE stream; the server then sends
 * `token` (one span, token-fragments.tsx), `heat` (the token's bar in the heat line), `metrics` (the
 * panel) and finally `end` (status), which also closes the stream.
 */
import type { ViewFinishReason as FinishReason, ViewMetrics as GenerationMetrics, ViewMode as Mode, ViewRequest as GenerationRequest } from './view-model.ts';
import { CloudSentRow, CloudTextFold } from './cloud-saw.tsx';
import { MarkedText } from './marked-text.tsx';
import { detailRows, summaryRows, type MetricRow } from './metrics-rows.ts';

/**
 * `waitingFor`: the run this one starts after (Compare), named in its status until it starts. `reply`: an
 * assistant's turn in a chat, whose prompt (the conversation) shows as the turns above it, not in its text.
 */
export function RunPanel(props: { id: string; request: GenerationRequest; title: string; waitingFor?: string; reply?: boolean }) {
  const { id, request } = props;
  return (
    <article class={props.reply ? 'run reply' : 'run'} id={`run-${id}`} hx-ext="sse" sse-connect={`/runs/${id}/events`} sse-close="end">
      <div class="run-head">
        <h2>
          {props.title}
          {/* τ decides nothing when every token comes from one model. */}
          {request.mode === 'joint' ? <small class="legend"> {routingTitle(request)}</small> : null}
        </h2>
        <button id={`stop-${id}`} class="secondary" type="button" hx-post={`/runs/${id}/stop`} hx-swap="none">
          Stop
        </button>
      </div>
      <p class="output" sse-swap="token" hx-swap="beforeend" data-testid="output">
        {props.reply ? null : (
          <span class="prompt">
            <MarkedText text={request.prompt} values={request.privateTexts?.map((t) => t.text)} />
          </span>
        )}
      </p>
      {/* Every token comes from the cloud in llm_only: no router score to show. */}
      {request.mode === 'llm_only' ? null : <HeatLine threshold={request.threshold} mode={request.mode} />}
      <p class="tok-detail" aria-live="polite" data-testid="token-detail">
        Tap or click a token for its router score and timings.
      </p>
      <div class="status" sse-swap="status,end" hx-swap="innerHTML" role="status">
        {props.waitingFor ? `waits for ${props.waitingFor} to finish, so neither's timings include the other's load…` : 'generating…'}
      </div>
      <div class="metrics" sse-swap="metrics" hx-swap="innerHTML" data-testid="metrics"></div>
    </article>
  );
}

/** τ, or the budgets given: under a budget the cut moves, so τ alone would misname it. */
function routingTitle(request: GenerationRequest): string {
  const budgets = [
    request.routeShare === undefined ? '' : `share ${request.routeShare}`,
    request.routeTokensPerMinute === undefined ? '' : `${request.routeTokensPerMinute} cloud tokens/min`,
    request.routeWaitMs === undefined ? '' : `wait ≤ ${request.routeWaitMs} ms`,
  ].filter(Boolean);
  return budgets.length ? budgets.join(', ') : `τ=${request.threshold.toFixed(2)}`;
}

/**
 * The router's score of each token as a bar under the text, with τ drawn across the bars: a glance shows
 * where the router was unsure. In small_only τ routes nothing; the mark shows where joint would have.
 */
function HeatLine(props: { threshold: number; mode: Mode }) {
  const tau = props.threshold.toFixed(2);
  return (
    <figure class="heat" style={`--tau:${(props.threshold * 100).toFixed(1)}%`} data-testid="heat">
      <div class="heat-bars" sse-swap="heat" hx-swap="beforeend">
        <span class="heat-tau" aria-hidden="true">
          <span>τ</span>
        </span>
      </div>
      <figcaption class="legend">
        router score per token; the line is τ {tau}
        {props.mode === 'joint' ? ', a bar below it went to the cloud' : ', below it joint mode would ask the cloud'}
      </figcaption>
    </figure>
  );
}

/** The routed count also rides as a bare number (data-value), for whoever reads the page by script. */
function MetricRows(props: { rows: MetricRow[]; routed: number }) {
  return (
    <>
      {props.rows.map(([label, value, key]) => (
        <>
          <dt>{label}</dt>
          <dd data-metric={key} data-value={key === 'routed' ? String(props.routed) : undefined}>
            {value}
          </dd>
        </>
      ))}
    </>
  );
}

/**
 * A run's figures: the summary first, ending with what was sent to the cloud, then the text the cloud saw
 * (`cloudText`, cloud-saw.tsx; both left out for figures shown without their done event's text), and the
 * rest, each folded under a native <details> (no script, works by keyboard), so the panel under a run reads
 * in a glance on a phone and nothing is lost.
 */
export function MetricsPanel(props: { metrics: GenerationMetrics; mode: Mode; cloudText?: string }) {
  const { metrics: m, cloudText } = props;
  return (
    <>
      <dl class="metrics-summary" data-testid="metrics-summary">
        <MetricRows rows={summaryRows(m)} routed={m.routed} />
        {cloudText === undefined ? null : <CloudSentRow cloud={m.cloud} ahead={{ steps: m.conditionalSteps, wrong: m.conditionalSkipped }} />}
      </dl>
      {cloudText === undefined ? null : <CloudTextFold cloudText={cloudText} />}
      <details class="metrics-more" data-testid="metrics-more">
        <summary>More details</summary>
        <dl>
          <MetricRows rows={detailRows(m, props.mode)} routed={m.routed} />
        </dl>
      </details>
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

/** The final status (how the run finished, or why it failed); also disables the Stop button out of band. */
export function EndStatus(props: { id: string; finish?: FinishReason; error?: string }) {
  return (
    <>
      {props.error !== undefined || props.finish === undefined ? (
        <span class="error" role="alert" data-finish="error">
          {props.error}
        </span>
      ) : (
        <span data-finish={props.finish}>{FINISH_TEXT[props.finish]}</span>
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

export function CloudState(props: { state: string; reason?: string }) {
  // `refused` and `mismatch` are the states an operator fixes by hand: say how, or what differs.
  const hint = props.state === 'refused' ? "the cloud shim refused this edge's token: check --cloud-token" : props.reason;
  return (
    <span class={`cloud-${props.state}`} title={hint}>
      cloud: {props.state}
    </span>
  );
}
