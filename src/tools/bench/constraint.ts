/**
 * `bench constraint`: what holding the output to a JSON schema costs the edge. Two figures, each against
 * the same request without a schema, in one process:
 *
 * - time between tokens: two greedy `small_only` generations of the same prompt, one with a 20-property
 *   schema and one without, open side by side and stepped in turn, one token each (the order swapped every
 *   round), so that the two tokens of a pair are timed a decode step apart and a shared machine's drift
 *   touches both alike; each token timed as a client sees it, from asking for it to getting it. Beside it,
 *   the constraint's own work per token timed alone (the next-token mask, applying it to the logits and
 *   the pick), which does not move with the machine's noise as the decode step does.
 * - first token: a request whose schema is new to the box pays its compile (and the check that it can end
 *   within the request's tokens) before the generation starts; timed from the request to its first token,
 *   next to the same request without a schema and with the schema compiled already. Each of these requests
 *   arrives at an idle box (IDLE_MS after the last work): right after a decode, onnxruntime's worker threads
 *   still spin waiting for more and take the cores the compile runs on, which the compile timed right after
 *   each round of the first part shows. The tokenizer's
 *   vocabulary is prepared once per box, at its first constrained request: that request is reported apart.
 *
 * The defaults (8 tokens a generation, 6 rounds) are the fewest that gave the same paired ratio run after run on
 * two shared cores: pairing the tokens, not lengthening the runs, is what steadies it.
 *
 * Default target: the random-weight pack of the Qwen2.5-0.5B shape (the real Qwen tokenizer, 151,669
 * tokens), built once under models/bench/ as `bench decode` and `bench edge` build it.
 */
import type { EdgeEngine } from '../../edge/loop/edge-engine.ts';
import { generate, type GenerationEvent } from '../../edge/loop/decoder-loop.ts';
import { compilerFor, prepareConstraint, stopIdsOf } from '../../edge/constraint/generation-constraint.ts';
import { TokenConstraint } from '../../edge/constraint/token-constraint.ts';
import { parseGenerationRequest } from '../../edge/request/generation-request.ts';
import { loadEdgeEngine } from '../../edge/server/load-edge-engine.ts';
import { AppError } from '../../shared/errors.ts';
import { median } from '../../shared/statistics.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { benchSchema, SCHEMA_PROPERTIES } from './bench-schema.ts';
import { formatConstraintBench, type ConstraintBenchResult } from './constraint-report.ts';
import { resolvePack } from './decode-target.ts';

export const USAGE = `bench constraint [--preset qwen2.5-0.5b | --pack DIR] [--tokens 8] [--rounds 6] [--threads N] [--json]
      what a JSON schema costs the edge: time between tokens with a ${SCHEMA_PROPERTIES}-property schema and without
      (greedy small_only generations of --tokens tokens, one of each stepped in turn, in --rounds rounds), its own
      work per token, and the first token of a request whose schema is new (compile included) beside one without;
      a preset is built once under models/bench/`;

const PROMPT = 'The little robot walked along the quiet beach at sunrise, counting shells and listening to the waves. ' + 'Write what it found as a record:';

export interface ConstraintBenchOptions {
  preset?: string;
  pack?: string;
  tokens: number;
  rounds: number;
  threads?: number;
  log: (line: string) => void;
}

/** Every request's token limit: the runs stop at --tokens themselves, and a schema's forced start must fit in it. */
const REQUEST_TOKENS = 256;

/** How long the box rests before each first-token request: onnxruntime's threads have stopped spinning by then. */
const IDLE_MS = 300;

/** The targets (issue 56): the bound on the time-between-tokens ratio, and on what a new schema adds to the first token. */
const TARGETS = { tbt_ratio: 1.05, first_token_extra_ms: 100 };

/** Request to first token: the request made ready (a new schema compiled), its prompt prefilled, its first token picked. */
async function firstTokenMs(engine: EdgeEngine, schema: Record<string, unknown> | undefined): Promise<number> {
  const t = performance.now();
  const generation = await open(engine, schema);
  try {
    await nextToken(generation);
    return performance.now() - t;
  } finally {
    await generation.return(undefined);
  }
}

/** A schema made ready as an entry point makes it: compiled (unless cached) and checked against the token limit. */
async function compileMs(engine: EdgeEngine, schema: Record<string, unknown>): Promise<number> {
  const t = performance.now();
  await prepareConstraint(engine, {
    constraint: parseGenerationRequest({ prompt: PROMPT, constraint: { jsonSchema: schema } }).constraint,
    maxNewTokens: REQUEST_TOKENS,
  });
  return performance.now() - t;
}

/** A generation with the schema or without, made ready as an entry point does, not started. */
async function open(engine: EdgeEngine, schema: Record<string, unknown> | undefined): Promise<AsyncGenerator<GenerationEvent>> {
  const request = parseGenerationRequest({
    prompt: PROMPT,
    mode: 'small_only',
    maxNewTokens: REQUEST_TOKENS,
    ...(schema ? { constraint: { jsonSchema: schema } } : {}),
  });
  await prepareConstraint(engine, request);
  return generate(engine, request);
}

/** The time to the generation's next token, and its id. */
async function nextToken(generation: AsyncGenerator<GenerationEvent>): Promise<{ ms: number; id: number }> {
  const t = performance.now();
  for (;;) {
    const { value, done } = await generation.next();
    if (done || value.type === 'done') throw new AppError('FAILED_PRECONDITION', 'a generation ended before its --tokens: lower --tokens');
    if (value.type === 'token') return { ms: performance.now() - t, id: value.id };
  }
}

/** One round: both generations opened, then stepped in turn; each side's times of its tokens after the first. */
async function pairedRound(engine: EdgeEngine, tokens: number, schema: Record<string, unknown>, schemaFirst: boolean) {
  const free = await open(engine, undefined);
  const held = await open(engine, schema);
  const times = { free: [] as number[], held: [] as number[], heldIds: [] as number[] };
  try {
    for (let i = 0; i < tokens; i++) {
      for (const side of schemaFirst ? (['held', 'free'] as const) : (['free', 'held'] as const)) {
        const { ms, id } = await nextToken(side === 'held' ? held : free);
        if (side === 'held') times.heldIds.push(id);
        // The first token carries the prefill: time between tokens starts after it.
        if (i > 0) times[side].push(ms);
      }
    }
  } finally {
    await free.return(undefined);
    await held.return(undefined);
  }
  return times;
}

/** The constraint's own work along `ids`, mean per token (what it adds to the time between tokens): each step's mask, applied to logits that make `ids[i]` the pick. */
async function maskMsPerToken(engine: EdgeEngine, schema: Record<string, unknown>, ids: readonly number[]): Promise<number> {
  const request = parseGenerationRequest({ prompt: PROMPT, mode: 'small_only', maxNewTokens: REQUEST_TOKENS, constraint: { jsonSchema: schema } });
  const compiled = await compilerFor(engine).compile(request.constraint!);
  const constraint = await TokenConstraint.open(compiled, stopIdsOf(engine));
  const logits = new Float32Array(engine.edgeModel.pack.vocabSize);
  const times: number[] = [];
  try {
    for (const id of ids) {
      logits[id] = 1;
      const t = performance.now();
      await constraint.finished();
      const picked = await constraint.pick(logits, { temperature: 0, topP: 1, random: Math.random, vocabLimit: engine.tokenizer.vocabSize });
      times.push(performance.now() - t);
      logits[id] = 0;
      if (picked !== id) throw new AppError('INTERNAL', `the replayed constraint picked ${picked} where the generation had ${id}`);
    }
  } finally {
    constraint.dispose();
  }
  return times.reduce((a, b) => a + b, 0) / times.length;
}

export async function benchConstraint(o: ConstraintBenchOptions): Promise<ConstraintBenchResult> {
  if (o.rounds < 1 || o.tokens < 3) throw new UsageError('--rounds must be at least 1 and --tokens at least 3');
  const { target, dir } = await resolvePack({ preset: o.preset, pack: o.pack, log: o.log });
  const parts = await loadEdgeEngine({ edgeModel: dir, threads: o.threads, router: undefined });
  const engine: EdgeEngine = { edgeModel: parts.edgeModel, router: parts.router, tokenizer: parts.tokenizer };
  try {
    o.log("the box's first constrained request: the tokenizer prepared, a schema compiled");
    const schema = benchSchema(SCHEMA_PROPERTIES, 'tbt');
    const firstConstraintMs = await compileMs(engine, schema);

    o.log('warm-up: one round');
    const warm = await pairedRound(engine, o.tokens, schema, false);
    const free: number[][] = [];
    const held: number[][] = [];
    const compileAfterDecode: number[] = [];
    for (let r = 0; r < o.rounds; r++) {
      o.log(`time between tokens: round ${r + 1} of ${o.rounds}`);
      const round = await pairedRound(engine, o.tokens, schema, r % 2 === 1);
      free.push(round.free);
      held.push(round.held);
      compileAfterDecode.push(await compileMs(engine, benchSchema(SCHEMA_PROPERTIES, `d${r}`)));
    }
    await Bun.sleep(IDLE_MS);
    const maskMs = await maskMsPerToken(engine, schema, warm.heldIds);

    const compile: number[] = [];
    const firstFree: number[] = [];
    const firstNew: number[] = [];
    const firstCompiled: number[] = [];
    for (let r = 0; r < o.rounds; r++) {
      o.log(`first token: round ${r + 1} of ${o.rounds}`);
      // Schemas the box has not seen: their property names carry the round.
      const compiled = benchSchema(SCHEMA_PROPERTIES, `c${r}`);
      await Bun.sleep(IDLE_MS);
      compile.push(await compileMs(engine, compiled));
      const sides: [number[], Record<string, unknown> | undefined][] = [
        [firstFree, undefined],
        [firstNew, benchSchema(SCHEMA_PROPERTIES, `n${r}`)],
        [firstCompiled, compiled],
      ];
      for (const [times, s] of r % 2 === 0 ? sides : sides.reverse()) {
        await Bun.sleep(IDLE_MS);
        times.push(await firstTokenMs(engine, s));
      }
    }

    const ratios = held.map((times, r) => median(times) / median(free[r]!));
    const pairs = held.flatMap((times, r) => times.map((ms, i) => ms / free[r]![i]!));
    const tbtFree = median(free.flat());
    const tbtHeld = median(held.flat());
    return {
      target,
      pack: dir,
      vocab_size: engine.edgeModel.pack.vocabSize,
      threads: o.threads ?? null,
      schema_properties: SCHEMA_PROPERTIES,
      tokens_per_run: o.tokens,
      rounds: o.rounds,
      tbt_ms_free: tbtFree,
      tbt_ms_schema: tbtHeld,
      tbt_ratio: tbtHeld / tbtFree,
      tbt_ratio_paired: median(pairs),
      tbt_ratio_by_round: { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) },
      tbt_ratio_quietest: Math.min(...held.flat()) / Math.min(...free.flat()),
      mask_ms_per_token: maskMs,
      tbt_ratio_from_mask: 1 + maskMs / tbtFree,
      first_constraint_ms: firstConstraintMs,
      compile_ms: median(compile),
      compile_ms_after_decode: median(compileAfterDecode),
      first_token_ms_free: median(firstFree),
      first_token_ms_new_schema: median(firstNew),
      first_token_ms_compiled_schema: median(firstCompiled),
      first_token_extra_ms: median(firstNew.map((ms, r) => ms - firstFree[r]!)),
      first_token_extra_ms_compiled: median(firstCompiled.map((ms, r) => ms - firstFree[r]!)),
      targets: TARGETS,
    };
  } finally {
    await parts.release();
  }
}

export async function main(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    preset: { type: 'string' },
    pack: { type: 'string' },
    tokens: { type: 'string' },
    rounds: { type: 'string' },
    threads: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const result = await benchConstraint({
    preset: values.preset,
    pack: values.pack,
    tokens: integerFlag(values, 'tokens', 8, [3, REQUEST_TOKENS])!,
    rounds: integerFlag(values, 'rounds', 6, [1, 100])!,
    threads: integerFlag(values, 'threads', undefined, [1, 256]),
    log: (line) => console.error(line),
  });
  console.log(formatConstraintBench(result));
  if (values.json) console.log(JSON.stringify(result));
}
