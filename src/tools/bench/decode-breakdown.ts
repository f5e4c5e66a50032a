/**
 * `bench decode --breakdown`: what one token costs besides the model's kernels, per intra-op thread
 * count (1 up to the machine's cores). For each decode step: the whole `append`; inside it onnxruntime's
 * run (kernels, and the binding's copies of every output); the rest of `append` (building the feeds,
 * cutting the last logits and hidden rows); then what the loop does with the result: a greedy pick
 * (argmax over the vocabulary's logits), a sampled pick (temperature 0.7, top-p 0.9: a softmax and a sort
 * of the nucleus) and a router call (a random router of the trained width on this pack's hidden size:
 * the same work as a trained one).
 *
 * @example
 * const rows = await decodeBreakdown({ dir: 'models/bench/qwen2.5-0.5b-q4', threadCounts: [1, 2], promptTokens: 100, steps: 16, log });
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OnnxRouter } from '../../edge/routing/router.ts';
import { DecoderModel } from '../../shared/model/decoder-model.ts';
import { argmax } from '../../shared/model/logits.ts';
import { loadModelPack, type ModelPack } from '../../shared/model/model-pack.ts';
import { sampleToken } from '../../shared/model/sampling.ts';
import { seededRandom } from '../../shared/seeded-random.ts';
import { median } from '../../shared/statistics.ts';
import { writeRandomRouterPack } from '../router/random-router.ts';
import { DEFAULT_HIDDEN_UNITS, DEFAULT_MEMBERS } from '../router/train-router-options.ts';
import { promptIds } from './decode-target.ts';

export interface BreakdownOptions {
  dir: string;
  threadCounts: readonly number[];
  promptTokens: number;
  steps: number;
  log: (line: string) => void;
}

/** Medians over the steps, in ms; `shares` are of the step plus the loop's work after it. */
export interface BreakdownRow {
  threads: number;
  step_ms: number;
  run_ms: number;
  append_rest_ms: number;
  argmax_ms: number;
  sample_ms: number;
  router_ms: number;
  shares: { run: number; append_rest: number; argmax: number; sample: number; router: number };
}

const WARMUP = 4;

export async function decodeBreakdown(o: BreakdownOptions): Promise<BreakdownRow[]> {
  const pack = loadModelPack(o.dir);
  const ids = await promptIds(pack, o.promptTokens);
  const routerDir = mkdtempSync(join(tmpdir(), 'breakdown-router-'));
  try {
    await writeRandomRouterPack(routerDir, {
      hiddenSize: pack.hiddenSize,
      vocabSize: pack.vocabSize,
      hiddenUnits: DEFAULT_HIDDEN_UNITS * DEFAULT_MEMBERS,
      seed: 1,
      edgeModel: o.dir,
      edgeModelDir: o.dir,
    });
    const router = await OnnxRouter.load(routerDir);
    const rows: BreakdownRow[] = [];
    try {
      for (const threads of o.threadCounts) rows.push(await measure(o, pack, ids, router, threads));
    } finally {
      await router.release();
    }
    return rows;
  } finally {
    rmSync(routerDir, { recursive: true, force: true });
  }
}

async function measure(o: BreakdownOptions, pack: ModelPack, ids: number[], router: OnnxRouter, threads: number): Promise<BreakdownRow> {
  o.log(`threads ${threads}: loading ${o.dir}, prefill ${ids.length} tokens, ${WARMUP} + ${o.steps} decode steps`);
  const model = await DecoderModel.load(pack, { threads });
  const sequence = model.newSequence();
  const random = seededRandom(1);
  const timed = { step: [] as number[], run: [] as number[], argmax: [] as number[], sample: [] as number[], router: [] as number[] };
  try {
    let last = await sequence.append(ids);
    for (let i = 0; i < WARMUP + o.steps; i++) {
      let t = performance.now();
      const next = argmax(last.logits);
      const argmaxMs = performance.now() - t;
      t = performance.now();
      sampleToken(last.logits, { temperature: 0.7, topP: 0.9, random, vocabLimit: pack.vocabSize });
      const sampleMs = performance.now() - t;
      t = performance.now();
      await router.score(last.hidden, last.logits, sequence.tokens, last.previousHidden);
      const routerMs = performance.now() - t;
      const runBefore = model.stats.runMs;
      t = performance.now();
      last = await sequence.append([next]);
      if (i < WARMUP) continue;
      timed.step.push(performance.now() - t);
      timed.run.push(model.stats.runMs - runBefore);
      timed.argmax.push(argmaxMs);
      timed.sample.push(sampleMs);
      timed.router.push(routerMs);
    }
  } finally {
    sequence.dispose();
    await model.release();
  }
  const m = Object.fromEntries(Object.entries(timed).map(([k, v]) => [k, median(v)])) as Record<keyof typeof timed, number>;
  const rest = Math.max(0, m.step - m.run);
  const whole = m.step + m.argmax + m.sample + m.router;
  return {
    threads,
    step_ms: m.step,
    run_ms: m.run,
    append_rest_ms: rest,
    argmax_ms: m.argmax,
    sample_ms: m.sample,
    router_ms: m.router,
    shares: { run: m.run / whole, append_rest: rest / whole, argmax: m.argmax / whole, sample: m.sample / whole, router: m.router / whole },
  };
}

export function formatBreakdown(rows: readonly BreakdownRow[]): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`.padStart(7);
  const ms = (x: number) => x.toFixed(2).padStart(8);
  const lines = ['threads   step ms   run ms  rest ms  argmax ms  sample ms  router ms   run   rest  argmax  sample  router'];
  for (const r of rows) {
    lines.push(
      `${String(r.threads).padStart(7)}  ${ms(r.step_ms)} ${ms(r.run_ms)} ${ms(r.append_rest_ms)}   ${ms(r.argmax_ms)}   ${ms(r.sample_ms)}   ${ms(r.router_ms)} ${pct(r.shares.run)}${pct(r.shares.append_rest)}${pct(r.shares.argmax)}${pct(r.shares.sample)}${pct(r.shares.router)}`,
    );
  }
  return lines.join('\n');
}
