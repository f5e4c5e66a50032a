/** @jsxImportSource hono/jsx */
/**
 * What one generated token adds to a run panel: its span in the text, and its bar in the heat line under
 * the text. Both carry the token's index, so a tap on either shows the token's detail line
 * (token-details.js); the detail text is built here, where the types are, and the browser only copies it.
 *
 * @example
 * String(<TokenSpan event={event} request={{ mode: 'joint', threshold: 0.7 }} />)
 * // ' <span class="tok tok-llm" data-index="3" ... data-detail="cloud model · router score 0.412 (below τ 0.70) · …">cat</span>'
 * String(<HeatBar event={event} />) // '<span class="heat-bar heat-llm" data-index="3" style="--score:41.2%" …></span>'
 */
import type { ViewRequest as GenerationRequest, ViewTokenEvent as TokenEvent } from './view-model.ts';

const SOURCE_LABEL = { slm: 'edge model', llm: 'cloud model', fallback: 'edge model (cloud unreachable)' } as const;

const ms = (v: number) => `${v.toFixed(1)} ms`;

/** The router's score and, in joint mode (the only one where τ decides), which side of τ it fell on. */
function scoreText(score: number | null, request: Pick<GenerationRequest, 'mode' | 'threshold'>): string {
  if (score === null) return 'no router score';
  const tau = request.threshold.toFixed(2);
  const side = request.mode !== 'joint' ? '' : score < request.threshold ? ` (below τ ${tau})` : ` (at or above τ ${tau})`;
  return `router score ${score.toFixed(3)}${side}`;
}

/** Source, score, the token's timings and, for a fallback, why the cloud could not serve it. */
export function tokenDetail(event: TokenEvent, request: Pick<GenerationRequest, 'mode' | 'threshold'>): string {
  const { slmMs, routerMs, cloudMs } = event.timings;
  const timings = [`edge ${ms(slmMs)}`, `router ${ms(routerMs)}`, ...(event.source === 'slm' ? [] : [`cloud ${ms(cloudMs)}`])];
  const why = event.cloudError ? [event.cloudError] : [];
  return [SOURCE_LABEL[event.source], scoreText(event.score, request), timings.join(', '), ...why].join(' · ');
}

/**
 * Splits a token's leading spaces from its word, so the token's marking (a fallback's underline, a cloud
 * token's background) covers the word and not the gap before it. A token of spaces only keeps them: they
 * are all there is to mark. Newlines stay in the word, where their ↵ marker shows whose they are.
 */
export function splitLeadingSpace(text: string): { lead: string; word: string } {
  const lead = /^[ \t]*/.exec(text)![0];
  return lead.length === text.length ? { lead: '', word: text } : { lead, word: text.slice(lead.length) };
}

/** Punctuation alone (",", "."): too small for a colour to show, so the CSS boxes it as well. */
const isPunctuation = (word: string) => /^[^\p{L}\p{N}\s]+$/u.test(word.trim());

export function TokenSpan(props: { event: TokenEvent; request: Pick<GenerationRequest, 'mode' | 'threshold'> }) {
  const { event } = props;
  const { lead, word } = splitLeadingSpace(event.text);
  const detail = tokenDetail(event, props.request);
  const classes = ['tok', `tok-${event.source}`, ...(isPunctuation(word) ? ['tok-punct'] : [])].join(' ');
  return (
    <>
      {lead}
      <span
        class={classes}
        data-index={String(event.index)}
        data-source={event.source}
        data-score={event.score === null ? undefined : event.score.toFixed(3)}
        data-detail={detail}
        title={detail}
      >
        {withVisibleNewlines(word)}
      </span>
    </>
  );
}

/**
 * A token's text with each newline wrapped in a `.nl` span, which the CSS marks with a ↵ in the token's
 * colour. A bare newline token would otherwise show as a blank gap with no colour, so nobody could tell
 * which model wrote it; the marker is generated content, so the page's text (and a copy of it) is unchanged.
 */
function withVisibleNewlines(text: string) {
  const lines = text.split('\n');
  return lines.map((line, i) =>
    i === 0 ? (
      line
    ) : (
      <>
        <span class="nl">{'\n'}</span>
        {line}
      </>
    ),
  );
}

/**
 * The token's bar in the heat line: filled to its router score (`--score`), coloured by its source; the
 * line's τ mark is drawn across every bar from the heat line's `--tau`. A token the router did not score
 * gets a hatched bar.
 */
export function HeatBar(props: { event: TokenEvent }) {
  const { index, score, source } = props.event;
  return (
    <span
      class={`heat-bar heat-${source}${score === null ? ' heat-none' : ''}`}
      data-index={String(index)}
      style={score === null ? undefined : `--score:${(score * 100).toFixed(1)}%`}
    ></span>
  );
}
