/**
 * Which appends share the next forward pass of one model: the scheduler's whole policy, one pure
 * decision from what waits and the time (decode-scheduler.ts carries it out). One pass runs at a time
 * (onnxruntime-node runs a session on the JavaScript thread), so each decision picks the next one:
 *
 * - Decode steps (one token, or in the plain layout up to `appendTokens` into a cache: every row then
 *   computes the longest row's positions, which pays only where a pass costs little more than its fixed
 *   work) share a pass, up to `maxBatch` rows, in the rows of the kept batch buffers that already hold them.
 * - Before a decode pass the policy waits, until `gatherMs` after the turn began, for the sequences of the
 *   last pass that are not back yet (each does its router and sampling work between steps), so a batch
 *   does not split into a pass of one and a pass of the rest.
 * - Multi-token appends go in pieces of `prefillChunk`, one piece between two decode passes: a newcomer's
 *   long prompt delays the others by a piece a step, not by the whole prompt. Once nobody has decoded
 *   for `quietMs`, pieces of `quietPrefillChunk`: small pieces only protect others, and cost the prompt.
 * - First prompts of several empty sequences waiting together share one pass: as many tokens of each as
 *   the shortest has, `prefillChunk` in all, the rest of each in lone pieces after (never more passes
 *   than alone: cutting every row short of the bound would add one).
 * - A plain-layout pass whose batch buffers would not fit the model's KV pool runs as several: past it,
 *   every pass copies each row's cache into fresh memory, and page faults cost more than batching saves.
 *
 * Measurements behind the defaults and these rules: docs/model-packs.md, "Batched decoding".
 *
 * @example
 * const decision = decideNextPass(queue, clock(), settings);
 * if (decision.kind === 'wait') setTimeout(again, decision.untilMs - clock());
 */

/** Most tokens of a prefill piece while others decode: each pass reads every weight again, so smaller pieces cost the newcomer much more than they save the others. */
export const DEFAULT_PREFILL_CHUNK = 128;
/** Long enough for the sequences of a pass to do their router and sampling work and come back; waited only while one of them is missing. */
export const DEFAULT_GATHER_MS = 4;
/**
 * A generation steps every few tens of milliseconds (a routed token's round trip included, or hidden by
 * speculation); one that has not for a second waits on something slower, and a whole prompt's pass
 * before its next step costs it little by comparison.
 */
export const DEFAULT_QUIET_MS = 1000;
/** Most tokens of a prefill piece with nobody to protect: fewer, longer passes read the weights fewer times. */
export const DEFAULT_QUIET_PREFILL_CHUNK = 512;

export interface SchedulerSettings {
  maxBatch: number;
  prefillChunk: number;
  gatherMs: number;
  /** Most tokens of an append into a cache that joins a decode pass; 1 where the layout cannot pad rows (fused). */
  appendTokens: number;
  quietMs: number;
  quietPrefillChunk: number;
  /** Pool bytes a pass over caches of `lengths`, fed `counts` tokens each, writes into; absent where passes run whole (kv-layout.ts). */
  passBytes?: (lengths: readonly number[], counts: readonly number[]) => number;
  /** The KV pool's bound that `passBytes` must fit. */
  poolBytes: number;
}

/** A sequence as the policy sees it: known by identity, holding `length` positions. */
export interface QueuedSequence {
  readonly length: number;
}

export interface QueuedAppend<S extends QueuedSequence = QueuedSequence> {
  readonly sequence: S;
  readonly tokens: readonly number[];
}

/** A multi-token append, `done` of its tokens fed so far. */
export interface QueuedPrefill<S extends QueuedSequence = QueuedSequence> extends QueuedAppend<S> {
  readonly done: number;
}

export interface SchedulerQueue<A extends QueuedAppend, P extends QueuedPrefill> {
  /** Decode steps waiting, oldest first. */
  readonly steps: readonly A[];
  /** Multi-token appends waiting or partly fed, oldest first. */
  readonly prefills: readonly P[];
  /** The sequences of the last decode pass. */
  readonly lastPass: ReadonlySet<QueuedSequence>;
  /** The sequence each row of the kept batch buffers holds (kept-batch.ts); empty when none are kept. */
  readonly keptRows: readonly (QueuedSequence | undefined)[];
  /** Decode passes and prefill pieces take turns while both wait. */
  readonly turn: 'decode' | 'prefill';
  /** When this turn began: the last pass ended, or the scheduler woke. */
  readonly turnStartedAt: number;
  /** When the last decode pass ended; -Infinity before the first. */
  readonly lastDecodeAt: number;
}

export type Decision<A, P> =
  /** Passes run back to back, each its rows in order (row b of the batch buffers for `rows[b]`). */
  | { kind: 'decode'; passes: A[][] }
  /** The next `tokens` of `job`'s append, alone. */
  | { kind: 'prefill'; job: P; tokens: number }
  /** The first `tokens` of each job's prompt in one pass (the shortest's whole prompt). */
  | { kind: 'prompts-together'; jobs: P[]; tokens: number }
  | { kind: 'wait'; untilMs: number }
  | { kind: 'idle' };

/** Whether an append of `tokens` into a cache of `cached` positions waits as a decode step (else as a prefill). */
export function joinsDecodePass(tokens: number, cached: number, settings: Pick<SchedulerSettings, 'appendTokens'>): boolean {
  return tokens === 1 || (tokens <= settings.appendTokens && cached > 0);
}

/** The next pass, or a wait, or nothing to do: see the header. */
export function decideNextPass<A extends QueuedAppend, P extends QueuedPrefill>(
  queue: SchedulerQueue<A, P>,
  now: number,
  settings: SchedulerSettings,
): Decision<A, P> {
  const { steps, prefills } = queue;
  if (steps.length === 0 && prefills.length === 0) return { kind: 'idle' };
  if (steps.length > 0 && (queue.turn === 'decode' || prefills.length === 0)) {
    const untilMs = queue.turnStartedAt + settings.gatherMs;
    if (steps.length < settings.maxBatch && now < untilMs && someoneComing(queue)) return { kind: 'wait', untilMs };
    const rows = inKeptRows(steps.slice(0, settings.maxBatch), queue.keptRows);
    return { kind: 'decode', passes: passesThatFit(rows, settings) };
  }
  const together = firstPrompts(prefills, settings);
  if (together.length > 1) return { kind: 'prompts-together', jobs: together, tokens: together[0]!.tokens.length };
  const job = prefills[0]!;
  const quiet = steps.length === 0 && now - queue.lastDecodeAt >= settings.quietMs;
  return { kind: 'prefill', job, tokens: Math.min(quiet ? settings.quietPrefillChunk : settings.prefillChunk, job.tokens.length - job.done) };
}

/** Whether a sequence of the last pass has nothing queued yet. */
function someoneComing(queue: SchedulerQueue<QueuedAppend, QueuedPrefill>): boolean {
  const queued = new Set([...queue.steps, ...queue.prefills].map((w) => w.sequence));
  return [...queue.lastPass].some((s) => !queued.has(s));
}

/**
 * `steps` in the row order of the next pass: a sequence whose kept row is among the first `steps.length`
 * keeps it (its row need not be copied in again), the others fill the rows left, in their order.
 */
export function inKeptRows<A extends QueuedAppend>(steps: readonly A[], keptRows: readonly (QueuedSequence | undefined)[]): A[] {
  const placed: (A | undefined)[] = new Array(steps.length).fill(undefined);
  const rest: A[] = [];
  for (const step of steps) {
    const row = keptRows.indexOf(step.sequence);
    if (row !== -1 && row < steps.length) placed[row] = step;
    else rest.push(step);
  }
  return placed.map((step) => step ?? rest.shift()!);
}

/** `rows` as one pass, or, where passes take their buffers from the pool, in groups whose buffers fit it. */
function passesThatFit<A extends QueuedAppend>(rows: A[], settings: SchedulerSettings): A[][] {
  const { passBytes } = settings;
  if (!passBytes) return [rows];
  const passes: A[][] = [];
  for (const row of rows) {
    const last = passes.at(-1);
    const together = [...(last ?? []), row];
    if (
      last &&
      passBytes(
        together.map((s) => s.sequence.length),
        together.map((s) => s.tokens.length),
      ) <= settings.poolBytes
    )
      last.push(row);
    else passes.push([row]);
  }
  return passes;
}

/**
 * Waiting prompts of empty sequences, none of their tokens fed yet, shortest first: as many as one pass of
 * the shortest's length takes within `prefillChunk` tokens (none unless two or more).
 */
function firstPrompts<P extends QueuedPrefill>(prefills: readonly P[], settings: SchedulerSettings): P[] {
  const fresh = prefills.filter((p) => p.done === 0 && p.sequence.length === 0).sort((a, b) => a.tokens.length - b.tokens.length);
  if (fresh.length < 2) return [];
  return fresh.slice(0, Math.min(settings.maxBatch, Math.floor(settings.prefillChunk / fresh[0]!.tokens.length)));
}
