/** @jsxImportSource hono/jsx */
/**
 * What left the box for the cloud in one run, in its figures: a row "Sent to the cloud" (tokens and
 * bytes, placeholders in place of private values, hidden-state bytes, positions the edge kept home because a
 * private value was under way there) at the end of the summary, and folded under "What the cloud saw" the
 * text the cloud held at the end, each private value as its placeholder. The text is shown escaped, as text.
 *
 * @example
 * cloudSentText({ tokensSent: 34, bytesSent: 586, hiddenStateBytes: 0, steps: 23, streams: 1, placeholders: 1, withheldSteps: 0 });
 * // '34 tokens (586 B), 1 placeholder, no hidden states, 0 positions kept home'
 */
import type { ViewCloudReport as CloudReport } from './view-model.ts';

/** Bytes as a person reads them: 586 B, 12.3 kB, 4.1 MB (powers of 1000). */
export function byteText(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1_000_000) return `${(bytes / 1000).toFixed(1)} kB`;
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The row's value; "nothing" when the run sent the cloud nothing (the edge alone, or no token routed). */
export function cloudSentText(r: CloudReport): string {
  if (r.tokensSent === 0 && r.bytesSent === 0) return 'nothing';
  return [
    `${count(r.tokensSent, 'token', 'tokens')} (${byteText(r.bytesSent)})`,
    count(r.placeholders, 'placeholder', 'placeholders'),
    r.hiddenStateBytes > 0 ? `${byteText(r.hiddenStateBytes)} of hidden states` : 'no hidden states',
    `${count(r.withheldSteps, 'position', 'positions')} kept home`,
  ].join(', ');
}

/** The row under a run's summary; the figures ride as bare numbers too (data-*), for whoever reads the page by script. */
export function CloudSentRow(props: { cloud: CloudReport }) {
  const r = props.cloud;
  return (
    <>
      <dt>Sent to the cloud</dt>
      <dd
        data-metric="cloud-sent"
        data-tokens={String(r.tokensSent)}
        data-bytes={String(r.bytesSent)}
        data-placeholders={String(r.placeholders)}
        data-hidden-state-bytes={String(r.hiddenStateBytes)}
        data-withheld-steps={String(r.withheldSteps)}
      >
        {cloudSentText(r)}
      </dd>
    </>
  );
}

/** The text the cloud held at the end, folded: it can be a whole conversation. */
export function CloudTextFold(props: { cloudText: string }) {
  return (
    <details class="cloud-text" data-testid="cloud-text">
      <summary>What the cloud saw</summary>
      {props.cloudText === '' ? <p class="legend">Nothing: no step of this run went to the cloud.</p> : <pre>{props.cloudText}</pre>}
    </details>
  );
}
