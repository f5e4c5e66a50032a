/** @jsxImportSource hono/jsx */
/**
 * What left the box for the cloud in one run, in its figures: a row "Sent to the cloud" (tokens and
 * bytes, placeholders in place of private values, hidden-state bytes, positions the edge kept home because a
 * private value was under way there) at the end of the summary, and folded under "What the cloud saw" the
 * text the cloud held at the end, each private value as its placeholder. The text is shown escaped, as text.
 *
 * With decoding ahead, what is sent depends on timing as well as on the text: a step can go out on the
 * edge's guess while the cloud answers the one before, and a wrong guess's step is sent for nothing; a
 * stream the cloud ended is opened again with the whole context. The same answer can so cost different
 * counts from run to run, and the row says how many steps went on a guess and how many streams were
 * opened, with a line saying why, whenever either happened.
 *
 * @example
 * cloudSentText({ tokensSent: 34, bytesSent: 586, hiddenStateBytes: 0, steps: 23, streams: 1, placeholders: 1, withheldSteps: 0 });
 * // '34 tokens (586 B), 1 placeholder, no hidden states, 0 positions kept home'
 * cloudSentText({ ...report, streams: 2 }, { steps: 3, wrong: 1 });
 * // '…, 0 positions kept home, 3 steps sent ahead on a guess (1 wrong), 2 streams opened'
 */
import type { ViewCloudReport as CloudReport } from './view-model.ts';

/** Steps sent on the edge's guess while the step before was in flight, and those whose guess was wrong. */
export interface SentAhead {
  steps: number;
  wrong: number;
}

/** Bytes as a person reads them: 586 B, 12.3 kB, 4.1 MB (powers of 1000). */
export function byteText(bytes: number): string {
  if (bytes < 1000) return `${bytes} B`;
  if (bytes < 1_000_000) return `${(bytes / 1000).toFixed(1)} kB`;
  return `${(bytes / 1_000_000).toFixed(1)} MB`;
}

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/** The row's value; "nothing" when the run sent the cloud nothing (the edge alone, or no token routed). */
export function cloudSentText(r: CloudReport, ahead: SentAhead = { steps: 0, wrong: 0 }): string {
  if (r.tokensSent === 0 && r.bytesSent === 0) return 'nothing';
  return [
    `${count(r.tokensSent, 'token', 'tokens')} (${byteText(r.bytesSent)})`,
    count(r.placeholders, 'placeholder', 'placeholders'),
    r.hiddenStateBytes > 0 ? `${byteText(r.hiddenStateBytes)} of hidden states` : 'no hidden states',
    `${count(r.withheldSteps, 'position', 'positions')} kept home`,
    ...((r.gateBlockedSteps ?? 0) > 0 ? [`${count(r.gateBlockedSteps!, 'step', 'steps')} stopped by the last check`] : []),
    ...(ahead.steps > 0 ? [`${count(ahead.steps, 'step', 'steps')} sent ahead on a guess (${ahead.wrong} wrong)`] : []),
    ...(r.streams > 1 ? [`${r.streams} streams opened`] : []),
  ].join(', ');
}

/** Why the counts of a run with guesses or reopened streams are not those of another run with the same text. */
export function sentVariesText(r: CloudReport, ahead: SentAhead): string | null {
  const why = [
    ...(ahead.steps > 0 ? ["decoding ahead sent steps on the edge's guess while the cloud answered the one before, a wrong guess's for nothing"] : []),
    ...(r.streams > 1 ? ['each stream opened again sent the whole context again'] : []),
  ];
  if (why.length === 0) return null;
  return `These counts depend on timing as well as on the text: ${why.join('; ')}. The same answer can cost more or less on another run.`;
}

/** The row under a run's summary; the figures ride as bare numbers too (data-*), for whoever reads the page by script. */
export function CloudSentRow(props: { cloud: CloudReport; ahead?: SentAhead }) {
  const r = props.cloud;
  const ahead = props.ahead ?? { steps: 0, wrong: 0 };
  const varies = sentVariesText(r, ahead);
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
        data-ahead-steps={String(ahead.steps)}
        data-ahead-wrong={String(ahead.wrong)}
        data-streams={String(r.streams)}
      >
        {cloudSentText(r, ahead)}
        {varies === null ? null : (
          <span class="legend sent-varies" data-testid="cloud-sent-varies">
            {varies}
          </span>
        )}
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
