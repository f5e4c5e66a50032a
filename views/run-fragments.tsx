/** @jsxImportSource hono/jsx */
/**
 * Fragments of a running generation. The run panel opens an SSE stream; the server then sends
 * `token` (one span, token-fragments.tsx), `heat` (the token's bar in the heat line), `metrics` (the
 * panel) and finally `end` (status), which also closes the stream.
 */
import type { FinishReason } from '../src/edge/decoder-loop.ts';
import type { GenerationMetrics } from '../src/edge/generation-metrics.ts';
import type { GenerationRequest, Mode } from '../src/edge/generation-request.ts';
import { budgetRows } from './routing-budget-rows.ts';

/** `waitingFor`: the run this one starts after (Compare), named in its status until it starts. */
export function RunPanel(props: { id: string; request: GenerationRequest; title: string; waitingFor?: string }) {
  const { id, request } = props;
  return (
    <article class="run" id={`run-${id}`} hx-ext="sse" sse-connect={`/runs/${id}/events`} sse-close="end">
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
        <span class="prompt">{request.prompt}</span>
      </p>
      {/* Every token comes from the cloud in llm_only: no router score to show. */}
      {request.mode === 'llm_only' ? null : <HeatLine threshold={request.threshold} mode={request.mode} />}
      <p class="tok-detail" aria-live="polite" data-testid="token-detail">
        Tap or click a token for its router score and timings.
      </p>
      <div class="status" sse-swap="status,end" hx-swap="innerHTML" role="status">
        {props.waitingFor ? `waits for ${props.waitingFor} to finish, so neither's timings include the other's load…` : 'generating…'}
      </div>
      <dl class="metrics" sse-swap="metrics" hx-swap="innerHTML" data-testid="metrics"></dl>
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

const ms = (v: number) => `${v.toFixed(1)} ms`;

/** The speculate setting, and in auto what it decided and from which figures (hit rate, round trip, edge step, saving vs cost). */
function speculationDecision(m: GenerationMetrics): string {
  const f = m.speculationFigures;
  if (m.speculateSetting !== 'auto' || !f) return m.speculateSetting;
  const { ahead, waited } = m.speculationDecisions;
  const rtt = f.roundTripMs === null ? '?' : ms(f.roundTripMs);
  const step = f.stepMs === null ? '?' : ms(f.stepMs);
  return `auto: ${ahead} / ${waited}; hit rate ${(f.hitRate * 100).toFixed(0)}%, round trip ${rtt}, edge step ${step}: saves ${ms(f.savingMs)}, costs ${ms(f.costMs)}`;
}

/** `meanBatchSize` as the page says it: a run alone, or batched with others. */
function batchText(meanBatchSize: number): string {
  if (meanBatchSize === 0) return 'no edge decode steps';
  return meanBatchSize > 1 ? `yes, ${meanBatchSize.toFixed(2)} rows per step` : 'no, each step ran alone';
}

export function MetricsPanel(props: { metrics: GenerationMetrics; mode: Mode }) {
  const m = props.metrics;
  // In llm_only the edge only appends the cloud's tokens, so its time between tokens says nothing; what
  // a token costs there is the cloud's round trip (and the cloud model behind it).
  const tbt: [string, string, string] =
    props.mode === 'llm_only'
      ? ['Time per token (cloud round trip, mean)', ms(m.tokens ? m.cloudMs / m.tokens : 0), 'tbt']
      : ['Time between tokens (edge, mean / p50 / p95)', `${ms(m.tbtMeanMs)} / ${ms(m.tbtP50Ms)} / ${ms(m.tbtP95Ms)}`, 'tbt'];
  // The routing cut means nothing when one model makes every token.
  const budget = props.mode === 'joint' ? m.budget : undefined;
  const rows: [string, string, string][] = [
    ['Tokens', String(m.tokens), 'tokens'],
    ['Routed to cloud', `${m.routed} (${(m.routedRatio * 100).toFixed(1)}%)`, 'routed'],
    ...(budget ? budgetRows(budget) : []),
    ['Fallback (cloud down)', String(m.fallback), 'fallback'],
    ['Prompt tokens (cached: restored from the prompt cache, not prefilled)', `${m.promptTokens} (${m.cachedTokens} cached)`, 'cached'],
    ['Time to first token', ms(m.ttftMs), 'ttft'],
    tbt,
    ['Edge model time', ms(m.slmMs), 'slm'],
    ['Batched with other runs (mean rows per edge decode step)', batchText(m.meanBatchSize), 'batch'],
    ['Router time', ms(m.routerMs), 'router'],
    ['Communication + cloud model', ms(m.cloudMs), 'cloud'],
    [
      'Decoded ahead while waiting (hit rate, time saved, steps wasted)',
      m.speculated ? `${(m.hitRate * 100).toFixed(0)}% of ${m.speculated}, ${ms(m.savedMs)} saved, ${m.wastedSteps} wasted` : 'none',
      'speculation',
    ],
    ['Decode ahead setting (auto: positions decoded ahead / waited, last decision)', speculationDecision(m), 'speculate'],
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

export function CloudState(props: { state: string }) {
  return <span class={`cloud-${props.state}`}>cloud: {props.state}</span>;
}
