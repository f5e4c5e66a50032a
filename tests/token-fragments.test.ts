/** A token's span and heat-line bar as the page receives them: exact markup from a given token event. */
import { expect, test } from 'bun:test';
import type { TokenEvent } from '../src/edge/loop/decoder-loop.ts';
import { HeatBar, splitLeadingSpace, TokenSpan, tokenDetail } from '../views/token-fragments.tsx';

function token(fields: Partial<TokenEvent>): TokenEvent {
  return { type: 'token', index: 3, id: 42, text: ' cat', source: 'llm', score: 0.41249, timings: { slmMs: 1.25, routerMs: 0.04, cloudMs: 15.5 }, ...fields };
}
const joint = { mode: 'joint', threshold: 0.7 } as const;

test('the leading space goes before the span, so the marking covers the word only', () => {
  expect(String(TokenSpan({ event: token({}), request: joint }))).toBe(
    ' <span class="tok tok-llm" data-index="3" data-source="llm" data-score="0.412" data-detail="cloud model · router score 0.412 (below τ 0.70) · edge 1.3 ms, router 0.0 ms, cloud 15.5 ms" title="cloud model · router score 0.412 (below τ 0.70) · edge 1.3 ms, router 0.0 ms, cloud 15.5 ms">cat</span>',
  );
  expect(['cat', ' cat', '  \tcat', ' ', '\n', ' \nThe', ''].map(splitLeadingSpace)).toEqual([
    { lead: '', word: 'cat' },
    { lead: ' ', word: 'cat' },
    { lead: '  \t', word: 'cat' },
    // Spaces only: they are the token, and stay in its span.
    { lead: '', word: ' ' },
    { lead: '', word: '\n' },
    // A newline stays with the word, where its ↵ marker shows whose it is.
    { lead: ' ', word: '\nThe' },
    { lead: '', word: '' },
  ]);
});

test('punctuation alone is classed tok-punct; a word with punctuation is not', () => {
  const classes = (text: string) => /class="([^"]*)"/.exec(String(TokenSpan({ event: token({ text }), request: joint })))![1];
  expect([',', ' .', '."', '!?', 'cat,', ' 3', '\n'].map(classes)).toEqual([
    'tok tok-llm tok-punct',
    'tok tok-llm tok-punct',
    'tok tok-llm tok-punct',
    'tok tok-llm tok-punct',
    'tok tok-llm',
    'tok tok-llm',
    'tok tok-llm',
  ]);
});

test("the detail: source, score against τ in joint only, timings (cloud time unless the edge chose), a fallback's reason", () => {
  const chosenByEdge = token({ source: 'slm', score: 0.9, timings: { slmMs: 2, routerMs: 0.5, cloudMs: 0 } });
  expect(tokenDetail(chosenByEdge, joint)).toBe('edge model · router score 0.900 (at or above τ 0.70) · edge 2.0 ms, router 0.5 ms');
  expect(tokenDetail(chosenByEdge, { mode: 'small_only', threshold: 0.7 })).toBe('edge model · router score 0.900 · edge 2.0 ms, router 0.5 ms');
  expect(tokenDetail(token({ score: null }), { mode: 'llm_only', threshold: 0.7 })).toBe(
    'cloud model · no router score · edge 1.3 ms, router 0.0 ms, cloud 15.5 ms',
  );
  const fallback = token({ source: 'fallback', score: 0.2, cloudError: 'cloud unreachable (connection refused)' });
  expect(tokenDetail(fallback, joint)).toBe(
    'edge model (cloud unreachable) · router score 0.200 (below τ 0.70) · edge 1.3 ms, router 0.0 ms, cloud 15.5 ms · cloud unreachable (connection refused)',
  );
});

test('markup in a token is escaped, in its text and in its detail', () => {
  const html = String(TokenSpan({ event: token({ text: ' <b>', source: 'fallback', cloudError: '"><script>' }), request: joint }));
  expect(html).not.toContain('<b>');
  expect(html).not.toContain('<script>');
  expect(html).toContain('&lt;b&gt;</span>');
});

test('a heat bar is filled to the score and coloured by source; an unscored token gets a hatched bar', () => {
  expect(String(HeatBar({ event: token({}) }))).toBe('<span class="heat-bar heat-llm" data-index="3" style="--score:41.2%"></span>');
  expect(String(HeatBar({ event: token({ source: 'slm', score: 1 }) }))).toBe('<span class="heat-bar heat-slm" data-index="3" style="--score:100.0%"></span>');
  expect(String(HeatBar({ event: token({ score: null }) }))).toBe('<span class="heat-bar heat-llm heat-none" data-index="3"></span>');
});
