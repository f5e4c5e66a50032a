/**
 * `bench embedded-batching`: what batching concurrent sessions' steps gains inside the embedded backend,
 * without gRPC. Sessions step as `bench fleet`'s edges do (a prompt window of real text, then routed steps
 * that each append the edge's tokens since the last step and ask for one token), all in this process, so
 * the figures are the backend's own: steps/s, forward passes per step, and the sizes of the batched passes.
 * Set beside `bench fleet --backend embedded` (the same through the shim), the difference is the shim's
 * own cost per step.
 *
 * @example
 * // bun run bench embedded-batching --sessions 64 --share 0.1,1 --max-batch 1,8 --duration 5 --json
 * await main(['--sessions', '64', '--share', '0.1,1', '--json']);
 */
import { EmbeddedBackend } from '../../cloud/backends/embedded-backend.ts';
import { DEFAULT_SHIM_CONFIG } from '../../cloud/config.ts';
import { DEMO } from '../../shared/paths.ts';
import { round } from '../../shared/statistics.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { buildDemoPacks } from '../models/demo.ts';
import { loadCorpus, promptWindow, type Corpus } from './load-workers.ts';

export const USAGE = `bench embedded-batching [--pack DIR] [--sessions 64] [--share 0.1,1] [--max-batch 1,8] [--append-tokens 16] [--duration S] [--threads 1] [--json]
      the embedded backend alone (no gRPC): sessions stepping as bench fleet's edges do, per routed share,
      --max-batch and --append-tokens (the shim's --batch-append-tokens; 1 = one-token steps only): steps/s,
      forward passes per step, batched pass sizes; --pack runs another cloud pack than
      the demo's (models convert-llama2c --layout fused makes the demo cloud model's fused one); --threads per
      pass, 1 by default, 0 for onnxruntime's choice (the shim's default)`;

export interface EmbeddedBatchingRow {
  share: number;
  max_batch: number;
  sessions: number;
  steps: number;
  steps_per_s: number;
  /** Forward passes of the model per step: 1 when every step runs alone, 1/8 with full passes of 8. */
  passes_per_step: number;
  /** Batched decode passes by their number of rows (`{"8": 120}`); empty when nothing was batched. */
  pass_sizes: Record<string, number>;
  /** Most context tokens of a step that shared a pass (SchedulerOptions.appendTokens). */
  append_tokens: number;
  /** Batched passes that fed the batch buffers kept from the passes before (a fused pack; kept-batch.ts). */
  passes_on_kept_buffers: number;
  /** Time inside the model's onnxruntime runs, per step (DecoderStats.runMs). */
  run_ms_per_step: number;
  /** steps_per_s over the same share's `--max-batch 1` row (null without one). */
  x_alone: number | null;
  /**
   * The `--max-batch 1` row's run_ms_per_step over this row's: what batching would gain if everything outside
   * onnxruntime's runs (the batcher's gathers and splits, sampling, the sessions' own work) were free.
   */
  run_x_alone: number | null;
}

const GEN_TOKENS = 128;
const SAMPLING = { temperature: 0, topP: 1, seed: undefined, stopTokenIds: [], topLogprobs: 0 };

/** One session slot: generations back to back until `until`, each one backend sequence. */
async function sessionSlot(backend: EmbeddedBackend, corpus: Corpus, index: number, share: number, until: number): Promise<number> {
  let steps = 0;
  // Each routed step carries the edge's tokens since the last one: 1/share − 1 of them, then asks for one.
  const edgeTokens = Math.max(0, Math.round(1 / share) - 1);
  for (let g = 0; performance.now() < until; g++) {
    const window = promptWindow(corpus, index, g, GEN_TOKENS);
    const context = [...window.context];
    let next = window.next;
    const sequence = backend.openSequence();
    try {
      for (let produced = 0; produced < GEN_TOKENS && performance.now() < until; produced++) {
        for (let k = 0; k < edgeTokens && produced < GEN_TOKENS - 1; k++, produced++) context.push(corpus.ids[next++]!);
        const result = await sequence.step({
          context,
          maxTokens: 1,
          sampling: SAMPLING,
          requestId: `batching-${index}-${g}`,
          signal: new AbortController().signal,
        });
        context.push(...result.ids);
        steps++;
      }
    } finally {
      sequence.dispose();
    }
  }
  return steps;
}

interface RowSettings {
  sessions: number;
  durationS: number;
  /** onnxruntime threads per pass; 0 = onnxruntime's choice, as the shim's default. */
  threads: number;
}

async function measure(pack: string, corpus: Corpus, share: number, maxBatch: number, appendTokens: number, o: RowSettings): Promise<EmbeddedBatchingRow> {
  const { sessions, durationS } = o;
  const backend = await EmbeddedBackend.load({ modelPack: pack, threads: o.threads, maxLiveSequences: 2 * sessions, maxBatch, appendTokens });
  try {
    const runsBefore = backend.model.stats.runs;
    const runMsBefore = backend.model.stats.runMs;
    const started = performance.now();
    const until = started + durationS * 1000;
    const steps = (await Promise.all(Array.from({ length: sessions }, (_, i) => sessionSlot(backend, corpus, i, share, until)))).reduce((a, b) => a + b, 0);
    const seconds = (performance.now() - started) / 1000;
    const sizes = backend.scheduler?.stats.sizes ?? [];
    const passSizes = Object.fromEntries(sizes.flatMap((count, rows) => (count && rows > 1 ? [[String(rows), count]] : [])));
    const passesPerStep = steps ? round((backend.model.stats.runs - runsBefore) / steps, 3) : 0;
    const onKeptBuffers = backend.scheduler?.stats.keptBuffersReused ?? 0;
    const runMsPerStep = steps ? round((backend.model.stats.runMs - runMsBefore) / steps, 4) : 0;
    return {
      share,
      max_batch: maxBatch,
      append_tokens: appendTokens,
      sessions,
      steps,
      steps_per_s: round(steps / seconds, 1),
      passes_per_step: passesPerStep,
      pass_sizes: passSizes,
      passes_on_kept_buffers: onKeptBuffers,
      run_ms_per_step: runMsPerStep,
      x_alone: null,
      run_x_alone: null,
    };
  } finally {
    await backend.close();
  }
}

/** Fills each row's ratios to the `--max-batch 1` row of its routed share, where there is one. */
export function compareWithAlone(rows: EmbeddedBatchingRow[]): void {
  for (const r of rows) {
    const alone = rows.find((a) => a.share === r.share && a.max_batch === 1);
    if (!alone) continue;
    r.x_alone = alone.steps_per_s ? round(r.steps_per_s / alone.steps_per_s, 2) : null;
    r.run_x_alone = r.run_ms_per_step ? round(alone.run_ms_per_step / r.run_ms_per_step, 2) : null;
  }
}

function numberList(raw: unknown, name: string, fallback: number[], valid: (n: number) => boolean): number[] {
  if (raw === undefined) return fallback;
  const list = String(raw)
    .split(',')
    .map((v) => Number(v.trim()));
  if (list.some((n) => !Number.isFinite(n) || !valid(n)))
    throw new UsageError(`--${name}: ${JSON.stringify(raw)} is not a comma-separated list of valid values`);
  return list;
}

export async function main(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    pack: { type: 'string' },
    sessions: { type: 'string' },
    share: { type: 'string' },
    'max-batch': { type: 'string' },
    'append-tokens': { type: 'string' },
    duration: { type: 'string' },
    threads: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const sessions = integerFlag(values, 'sessions', 64, [1, 256])!;
  const durationS = integerFlag(values, 'duration', 5, [1, 300])!;
  // One thread by default, as the runs docs/deploy-fleet.md describes were made; 0 is the shim's default.
  const threads = integerFlag(values, 'threads', 1, [0, 64])!;
  const shares = numberList(values.share, 'share', [0.1, 1], (n) => n > 0 && n <= 1);
  const maxBatches = numberList(values['max-batch'], 'max-batch', [1, 8], (n) => Number.isInteger(n) && n >= 1 && n <= 256);
  const appendTokens = numberList(
    values['append-tokens'],
    'append-tokens',
    [DEFAULT_SHIM_CONFIG.batchAppendTokens],
    (n) => Number.isInteger(n) && n >= 1 && n <= 1024,
  );
  const pack = values.pack === undefined ? DEMO.cloudPack : String(values.pack);
  if (values.pack === undefined) await buildDemoPacks();
  const corpus = await loadCorpus(pack);
  const rows: EmbeddedBatchingRow[] = [];
  for (const share of shares) {
    for (const maxBatch of maxBatches) {
      // Appends joining passes mean nothing without passes to join.
      for (const tokens of maxBatch === 1 ? [1] : appendTokens)
        rows.push(await measure(pack, corpus, share, maxBatch, tokens, { sessions, durationS, threads }));
    }
  }
  compareWithAlone(rows);
  const times = (x: number | null) => (x === null ? '-' : `${x}×`);
  const threadText = threads === 0 ? "onnxruntime's choice of threads" : threads === 1 ? 'one thread' : `${threads} threads`;
  console.log(`embedded backend alone (${pack}, ${threadText}), ${sessions} sessions for ${durationS} s per row`);
  console.log(
    '| routed share | max-batch | append-tokens | steps/s | × max-batch 1 | onnxruntime ms/step | × max-batch 1 inside onnxruntime (ceiling) | passes per step | batched passes by rows | on kept buffers |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows)
    console.log(
      `| ${r.share} | ${r.max_batch} | ${r.append_tokens} | ${r.steps_per_s} | ${times(r.x_alone)} | ${r.run_ms_per_step} | ${times(r.run_x_alone)} | ${r.passes_per_step} | ${
        Object.entries(r.pass_sizes)
          .map(([n, c]) => `${n}: ${c}`)
          .join(', ') || '-'
      } | ${r.passes_on_kept_buffers} |`,
    );
  if (values.json) console.log(JSON.stringify({ rows }));
}
