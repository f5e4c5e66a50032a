/** The JSON API's names: camelCase objects written as snake_case, by rule, at any depth. */
import { expect, test } from 'bun:test';
import { snakeCaseJson, snakeCaseKeys, snakeCaseName } from '../src/edge/http/snake-case-json.ts';

test('names: an underscore before each capital, lower-cased; digits and snake_case names unchanged', () => {
  const names = ['finishReason', 'tbtMeanMs', 'tbtP95Ms', 'routedRatio', 'cloudError', 'requestId', 'hitRate', 'tokens', 'max_new_tokens', 'x1'];
  expect(names.map(snakeCaseName)).toEqual([
    'finish_reason',
    'tbt_mean_ms',
    'tbt_p95_ms',
    'routed_ratio',
    'cloud_error',
    'request_id',
    'hit_rate',
    'tokens',
    'max_new_tokens',
    'x1',
  ]);
});

test('keys at every depth and inside arrays; values, nulls and key order kept', () => {
  const event = { type: 'done', finishReason: 'length', metrics: { tbtP50Ms: 1.5, speculationHits: 0 }, spans: [{ slmMs: 2 }, 'textValue', null], score: null };
  expect(snakeCaseKeys(event)).toEqual({
    type: 'done',
    finish_reason: 'length',
    metrics: { tbt_p50_ms: 1.5, speculation_hits: 0 },
    spans: [{ slm_ms: 2 }, 'textValue', null],
    score: null,
  });
  expect(snakeCaseJson(event)).toBe(
    '{"type":"done","finish_reason":"length","metrics":{"tbt_p50_ms":1.5,"speculation_hits":0},"spans":[{"slm_ms":2},"textValue",null],"score":null}',
  );
});

test('a field nobody listed comes out snake_case too', () => {
  expect(snakeCaseJson({ metrics: { speculationDecision: 'off', expectedSavingMs: 3 } })).toBe(
    '{"metrics":{"speculation_decision":"off","expected_saving_ms":3}}',
  );
});

test('an undefined field is left out, as JSON.stringify leaves it', () => {
  expect(snakeCaseJson({ cloudError: undefined, text: 'a' })).toBe('{"text":"a"}');
});
