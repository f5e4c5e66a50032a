/**
 * What `bench constraint` reports (constraint.ts): the result as `--json` prints it, and the lines it
 * prints for people, each target with its verdict.
 */

export interface ConstraintBenchResult {
  target: string;
  pack: string;
  vocab_size: number;
  threads: number | null;
  schema_properties: number;
  tokens_per_run: number;
  rounds: number;
  /** Medians over every token after the first of every round. */
  tbt_ms_free: number;
  tbt_ms_schema: number;
  /** tbt_ms_schema / tbt_ms_free. */
  tbt_ratio: number;
  /** Each pair's schema token / its free token: their median, the comparison the machine's noise moves least. */
  tbt_ratio_paired: number;
  /** Each round's ratio of medians: median, min, max. */
  tbt_ratio_by_round: { median: number; min: number; max: number };
  /** The fastest token with the schema / the fastest without: each side at the machine's quietest moment. */
  tbt_ratio_quietest: number;
  /** The constraint's work per token alone (mask, applying it, the pick), mean, at an idle box. */
  mask_ms_per_token: number;
  /** 1 + mask_ms_per_token / tbt_ms_free: the ratio the constraint's own work implies. */
  tbt_ratio_from_mask: number;
  /** The box's first constrained request made ready (the tokenizer's vocabulary prepared, its schema compiled and checked): once per box. */
  first_constraint_ms: number;
  /** A new schema compiled and checked (prepareConstraint) at an idle box, median over the rounds. */
  compile_ms: number;
  /** The same right after a decode, onnxruntime's threads still spinning. */
  compile_ms_after_decode: number;
  /** Request to first token, medians: without a schema, with a new one (compile included), with a compiled one. */
  first_token_ms_free: number;
  first_token_ms_new_schema: number;
  first_token_ms_compiled_schema: number;
  /** Each round's first token with a new schema less the one without, median: what a new schema adds, its compile included. */
  first_token_extra_ms: number;
  /** The same with a compiled schema: what is left without a compile (the measurement's noise, mostly). */
  first_token_extra_ms_compiled: number;
  targets: { tbt_ratio: number; first_token_extra_ms: number };
}

export function formatConstraintBench(r: ConstraintBenchResult): string {
  const f = (ms: number) => `${ms.toFixed(2)} ms`;
  const verdict = (ok: boolean) => (ok ? 'within target' : 'ABOVE target');
  return [
    `bench constraint — ${r.target} (${r.pack}), vocabulary ${r.vocab_size}, ${r.schema_properties}-property JSON schema`,
    `  time between tokens (${r.rounds} rounds of ${r.tokens_per_run} tokens each, the two generations stepped in turn): ${f(r.tbt_ms_free)} without, ${f(r.tbt_ms_schema)} with the schema`,
    `    ratio ${r.tbt_ratio.toFixed(3)}, paired tokens ${r.tbt_ratio_paired.toFixed(3)}; target ≤ ${r.targets.tbt_ratio}: ${verdict(r.tbt_ratio_paired <= r.targets.tbt_ratio)}`,
    `    per round: median ${r.tbt_ratio_by_round.median.toFixed(3)}, ${r.tbt_ratio_by_round.min.toFixed(3)}–${r.tbt_ratio_by_round.max.toFixed(3)}; the fastest token each: ${r.tbt_ratio_quietest.toFixed(3)}`,
    `    the constraint's own work ${f(r.mask_ms_per_token)} per token: ratio ${r.tbt_ratio_from_mask.toFixed(3)} from it alone`,
    `  the box's first constrained request (the tokenizer prepared once, a schema compiled): ${f(r.first_constraint_ms)}`,
    `  a new schema compiled and checked at an idle box: ${f(r.compile_ms)}; right after a decode (onnxruntime's threads still spinning): ${f(r.compile_ms_after_decode)}`,
    `  first token: ${f(r.first_token_ms_free)} without a schema, ${f(r.first_token_ms_new_schema)} with a new one, ${f(r.first_token_ms_compiled_schema)} with a compiled one`,
    `    per round, a new schema adds ${f(r.first_token_extra_ms)}, a compiled one ${f(r.first_token_extra_ms_compiled)}; target ≤ +${r.targets.first_token_extra_ms} ms: ${verdict(r.first_token_extra_ms <= r.targets.first_token_extra_ms)}`,
  ].join('\n');
}
