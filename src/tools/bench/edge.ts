/**
 * `bench edge`: what routing costs on the edge. Measures, in one run, the edge model's single decode
 * step, one router call, and the edge-side time between tokens of the decoder loop without any routing
 * (the edge model alone) and with the router routing at least 20% of the tokens. Cloud waiting time is
 * excluded (the loop's TBT already leaves it out), and the cloud is a zero-delay replay of the edge
 * model's own greedy tokens, so both runs decode exactly the same token sequence.
 *
 * Targets: the demo stories pair (default), any pack + router (`--pack`, `--router`), or a random-weight
 * pack of a real shape (`--preset qwen2.5-0.5b`, built once under models/bench/).
 */
import { basename, join } from 'node:path';
import type { CloudClient, CloudConversation, CloudStepRequest } from '../../edge/cloud/cloud-client.ts';
import { encodePrompt, generate, type DoneEvent, type EdgeEngine, type TokenEvent } from '../../edge/loop/decoder-loop.ts';
import { median } from '../../shared/statistics.ts';
import { parseGenerationRequest, type Mode } from '../../edge/request/generation-request.ts';
import { loadEdgeEngine } from '../../edge/server/load-edge-engine.ts';
import type { Router } from '../../edge/routing/router.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { DEMO, MODELS_DIR } from '../../shared/paths.ts';
import { integerFlag, parseFlags, UsageError } from '../cli-support.ts';
import { buildDemoPacks } from '../models/demo.ts';
import { packIsUpToDate } from '../models/pack-writer.ts';
import { ensureBenchPack } from '../models/random-pack.ts';
import { reprefillTokenMs } from './edge-reprefill.ts';
import { randomRouterSource, writeRandomRouterPack, type RandomRouterOptions } from '../router/random-router.ts';
import { DEFAULT_HIDDEN_UNITS, DEFAULT_MEMBERS } from '../router/train-router-options.ts';

export const USAGE = `bench edge [--pack DIR --router DIR | --preset qwen2.5-0.5b] [--tokens N] [--runs R] [--threads T] [--json]
      edge decode step, router call and time between tokens with and without routing (≥ 20% routed),
      and with the reference design's method (whole sequence recomputed per token, no KV cache);
      default target: the demo stories pair; a preset is built once under models/bench/`;

const PROMPT = 'Once upon a time, there was a little dog who liked to run in the park';
/** Share of tokens the routing runs aim to route: a margin above the at least 20% routed that the usage promises. */
const ROUTED_SHARE = 0.3;

export interface EdgeBenchOptions {
  pack?: string;
  router?: string;
  preset?: string;
  tokens: number;
  runs: number;
  threads?: number;
  log: (line: string) => void;
}

export interface EdgeBenchResult {
  target: string;
  pack: string;
  router: string;
  hidden_size: number;
  router_hidden_units: number | null;
  threads: number | null;
  tokens_per_run: number;
  runs: number;
  slm_step_ms: number;
  router_ms: number;
  router_share_of_step: number;
  tbt_ms_no_routing: number;
  tbt_ms_routing: number;
  tbt_ratio: number;
  /** The reference design's method (the whole sequence recomputed per token), median ms per token. */
  tbt_ms_reprefill: number;
  /** tbt_ms_reprefill / tbt_ms_no_routing. */
  speedup_vs_reprefill: number;
  threshold: number;
  routed_ratio: number;
}

/** The edge model alone: a "router" that does no work and never routes. */
const NO_ROUTER: Router = {
  info: { name: 'none', hiddenSize: null, defaultThreshold: 0 },
  score: async () => 1,
  release: async () => {},
};

/** A zero-delay cloud that answers each step with the token the edge model itself chose there. */
class ReplayCloud implements CloudClient {
  constructor(private readonly tokens: readonly number[]) {}

  openConversation(): CloudConversation {
    return {
      next: async (request: CloudStepRequest) => {
        const id = this.tokens[request.tokenIndex];
        if (id === undefined) throw new AppError('OUT_OF_RANGE', `replay cloud has no token ${request.tokenIndex}`);
        return { tokens: [id], text: '', logprobs: [], topAlternatives: [], cachedTokens: 0, backendMs: 0, shimMs: 0 };
      },
      close: async () => {},
    };
  }

  state() {
    return 'ready' as const;
  }

  async close(): Promise<void> {}
}

/** The pack and router folders to measure, building whatever is missing. */
async function resolveTarget(o: EdgeBenchOptions): Promise<{ target: string; pack: string; router: string }> {
  if (o.preset) {
    if (o.pack || o.router) throw new UsageError('--preset cannot be combined with --pack or --router');
    const pack = await ensureBenchPack(o.preset, o.log);
    const router = join(MODELS_DIR, 'bench', `${o.preset}-router`);
    const edge = loadModelPack(pack);
    const routerOptions: RandomRouterOptions = {
      hiddenSize: edge.hiddenSize,
      vocabSize: edge.vocabSize,
      // As wide as a router trained with the defaults: all its members side by side.
      hiddenUnits: DEFAULT_HIDDEN_UNITS * DEFAULT_MEMBERS,
      seed: 0,
      edgeModel: `../${o.preset}`,
      edgeModelDir: pack,
    };
    if (!packIsUpToDate(router, randomRouterSource(routerOptions), 'router.onnx')) {
      o.log(`building ${router} (random weights, once)`);
      await writeRandomRouterPack(router, { ...routerOptions, force: true });
    }
    return { target: `preset:${o.preset}`, pack, router };
  }
  if (o.pack || o.router) {
    if (!o.pack || !o.router) throw new UsageError('--pack and --router go together');
    return { target: 'packs', pack: o.pack, router: o.router };
  }
  await buildDemoPacks(DEMO, o.log);
  return { target: `demo:${basename(DEMO.edgePack)}`, pack: DEMO.edgePack, router: DEMO.routerPack };
}

async function runLoop(engine: EdgeEngine, mode: Mode, threshold: number, tokens: number) {
  const request = parseGenerationRequest({ prompt: PROMPT, mode, threshold, maxNewTokens: tokens });
  const events: TokenEvent[] = [];
  let done: DoneEvent | undefined;
  for await (const e of generate(engine, request)) {
    if (e.type === 'token') events.push(e);
    else done = e;
  }
  return { events, metrics: done!.metrics };
}

/** The τ below which `share` of `scores` fall, halfway between two neighbouring scores. */
function thresholdFor(scores: number[], share: number): number {
  const sorted = [...scores].sort((a, b) => a - b);
  const k = Math.min(sorted.length - 1, Math.max(1, Math.ceil(sorted.length * share)));
  return (sorted[k - 1]! + sorted[k]!) / 2;
}

export async function benchEdge(o: EdgeBenchOptions): Promise<EdgeBenchResult> {
  const { target, pack: packDir, router: routerDir } = await resolveTarget(o);
  const parts = await loadEdgeEngine({ edgeModel: packDir, threads: o.threads, router: routerDir });
  const { edgeModel, router, tokenizer } = parts;
  const pack = edgeModel.pack;
  try {
    // Reference run (also the warm-up): the greedy tokens the replay cloud will answer with, and their scores.
    o.log('reference run');
    const reference = await runLoop({ edgeModel, router, tokenizer }, 'small_only', 0, o.tokens);
    const ids = reference.events.map((e) => e.id);
    if (ids.length < 8) throw new AppError('FAILED_PRECONDITION', `the edge model stopped after ${ids.length} tokens; need at least 8 to measure`);
    const threshold = thresholdFor(
      reference.events.map((e) => e.score!),
      ROUTED_SHARE,
    );

    // One decode step at a time, and one router call on each step's hidden state.
    o.log('decode steps and router calls');
    const stepMs: number[] = [];
    const hiddens: Float32Array[] = [];
    // The logits and the context too: a router with logit or repetition features computes them per call.
    const steps: { logits: Float32Array; context: number[] }[] = [];
    for (let pass = 0; pass < Math.min(o.runs, 3); pass++) {
      const sequence = edgeModel.newSequence();
      try {
        await sequence.append(encodePrompt({ edgeModel, tokenizer }, PROMPT));
        for (const id of ids) {
          const t = performance.now();
          const { hidden, logits } = await sequence.append([id]);
          stepMs.push(performance.now() - t);
          if (pass === 0) {
            hiddens.push(hidden);
            steps.push({ logits, context: ids.slice(0, hiddens.length) });
          }
        }
      } finally {
        sequence.dispose();
      }
    }
    const routerMs: number[] = [];
    for (let pass = 0; pass < Math.max(1, Math.ceil(200 / hiddens.length)); pass++) {
      for (const [k, h] of hiddens.entries()) {
        const t = performance.now();
        await router.score(h, steps[k]!.logits, steps[k]!.context, hiddens[k - 1]);
        routerMs.push(performance.now() - t);
      }
    }

    // Interleaved, so that drifts in machine load touch both sides alike.
    const baseline = { edgeModel, router: NO_ROUTER, tokenizer };
    const routing = { edgeModel, router, tokenizer, cloud: new ReplayCloud(ids) };
    const tbtBase: number[] = [];
    const tbtRouting: number[] = [];
    const routed: number[] = [];
    for (let r = 0; r < o.runs; r++) {
      o.log(`run ${r + 1}/${o.runs}`);
      tbtBase.push((await runLoop(baseline, 'small_only', 0, o.tokens)).metrics.tbtP50Ms);
      const joint = await runLoop(routing, 'joint', threshold, o.tokens);
      if (joint.events.map((e) => e.id).join() !== ids.join()) throw new AppError('INTERNAL', 'the routing run decoded other tokens than the reference');
      tbtRouting.push(joint.metrics.tbtP50Ms);
      routed.push(joint.metrics.routedRatio);
    }

    // The reference design's method (no KV cache, edge-reprefill.ts) on the same pack, prompt and tokens:
    // once, since it is slow by design.
    o.log('re-prefill baseline (whole sequence recomputed per token)');
    const reprefill = median(await reprefillTokenMs(edgeModel, encodePrompt({ edgeModel, tokenizer }, PROMPT), ids));
    const edgeStep = median(stepMs);
    const routerCall = median(routerMs);
    const noRouting = median(tbtBase);
    const withRouting = median(tbtRouting);
    return {
      target,
      pack: pack.dir,
      router: routerDir,
      hidden_size: pack.hiddenSize,
      router_hidden_units: (router.info.training?.hidden_units as number | undefined) ?? null,
      threads: o.threads ?? null,
      tokens_per_run: ids.length,
      runs: o.runs,
      slm_step_ms: edgeStep,
      router_ms: routerCall,
      router_share_of_step: routerCall / edgeStep,
      tbt_ms_no_routing: noRouting,
      tbt_ms_routing: withRouting,
      tbt_ratio: withRouting / noRouting,
      tbt_ms_reprefill: reprefill,
      speedup_vs_reprefill: reprefill / noRouting,
      threshold,
      routed_ratio: median(routed),
    };
  } finally {
    await parts.release();
  }
}

export function formatEdgeBench(r: EdgeBenchResult): string {
  const ms = (v: number) => `${v.toFixed(3)} ms`;
  const rows: [string, string][] = [
    ['target', r.target],
    ['edge pack', `${r.pack} (hidden ${r.hidden_size})`],
    ['router', `${r.router} (${r.router_hidden_units ?? '?'} hidden units)`],
    ['tokens per run × runs', `${r.tokens_per_run} × ${r.runs}`],
    ['edge decode step (median)', ms(r.slm_step_ms)],
    ['router call (median)', `${ms(r.router_ms)} (${(100 * r.router_share_of_step).toFixed(2)}% of a step)`],
    ['TBT, no routing (edge alone)', ms(r.tbt_ms_no_routing)],
    [`TBT, routing at τ=${r.threshold.toFixed(4)}`, `${ms(r.tbt_ms_routing)} (${(100 * r.routed_ratio).toFixed(1)}% routed, cloud time excluded)`],
    ['TBT ratio', r.tbt_ratio.toFixed(3)],
    [
      'TBT, whole sequence recomputed per token',
      `${ms(r.tbt_ms_reprefill)} (the reference design's method; KV cache ${r.speedup_vs_reprefill.toFixed(1)}x faster)`,
    ],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

export async function main(args: string[]): Promise<void> {
  const { values, positionals } = parseFlags(args, {
    pack: { type: 'string' },
    router: { type: 'string' },
    preset: { type: 'string' },
    tokens: { type: 'string' },
    runs: { type: 'string' },
    threads: { type: 'string' },
    json: { type: 'boolean' },
  });
  if (positionals.length) throw new UsageError(`unexpected argument ${positionals[0]}`);
  const tokens = integerFlag(values, 'tokens', values.preset ? 32 : 64, [8, 1024])!;
  const runs = integerFlag(values, 'runs', values.preset ? 3 : 21, [1, 100])!;
  const threads = integerFlag(values, 'threads', undefined, [1, 256]);
  const result = await benchEdge({
    pack: values.pack,
    router: values.router,
    preset: values.preset,
    tokens,
    runs,
    threads,
    log: (line) => console.error(line),
  });
  console.log(formatEdgeBench(result));
  if (values.json) console.log(JSON.stringify(result));
}
