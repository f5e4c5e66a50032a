/**
 * The JSON API speaks snake_case, like its requests and `proto/edge_generator.proto`, while the code's own
 * objects are camelCase. The names are converted here, once, at the serialization boundary, and by rule
 * rather than by a list: a field added to an event or to the metrics comes out snake_case with no change
 * here. The rule gives the proto's names (`tbtP95Ms` → `tbt_p95_ms`, `cloudError` → `cloud_error`).
 *
 * @example
 * snakeCaseName('finishReason');                  // 'finish_reason'
 * snakeCaseKeys({ metrics: { tbtMeanMs: 1.5 } }); // { metrics: { tbt_mean_ms: 1.5 } }
 * snakeCaseJson({ routedRatio: 0.25 });           // '{"routed_ratio":0.25}'
 */
import { isRecord } from '../../shared/is-record.ts';

/** A camelCase name in snake_case: an underscore before each capital, which becomes lower case. */
export function snakeCaseName(name: string): string {
  return name.replace(/[A-Z]/g, (capital) => `_${capital.toLowerCase()}`);
}

/** `value` with every object key, at any depth and inside arrays, in snake_case; values are kept as they are. */
export function snakeCaseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(snakeCaseKeys);
  if (!isRecord(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([key, inner]) => [snakeCaseName(key), snakeCaseKeys(inner)]));
}

/** `JSON.stringify` of `value` with its keys in snake_case. */
export function snakeCaseJson(value: unknown): string {
  return JSON.stringify(snakeCaseKeys(value));
}
