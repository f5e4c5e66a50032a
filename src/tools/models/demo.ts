/**
 * `models demo`: builds the demo packs from the stories260K checkpoints beside the project. The demo pair
 * (DEMO): the 1-layer distilled student on the edge, the full 5-layer model in the cloud, and the router
 * between them (trained on the first 80% of the TinyStories excerpt). The truncated pair
 * (TRUNCATED_DEMO): the first 3 layers of the 5-layer model, untrained, with its own router. A pack whose
 * recorded source matches is left alone, so re-running is a no-op.
 *
 * Training a router is the long step (the first `bun run start` waits for it; converting a pack takes
 * moments): `log` says so and about how long as it begins (TRAINING_ESTIMATE), and the training tells
 * `progress` how far it is.
 *
 * @example
 * await buildDemoPacks();                         // the demo pair only (what `bun run start` needs)
 * await buildAllDemoPacks((line) => console.log(line), progressFor());   // both pairs (`bun run models demo`)
 */
import { DEMO, TRUNCATED_DEMO } from '../../shared/paths.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import { routerSource } from '../router/router-source.ts';
import { DEMO_ROUTER_TRAINING, type TrainRouterOptions } from '../router/train-router-options.ts';
import { trainRouter } from '../router/train-router.ts';
import { convertLlama2c, llama2cSource, type ConvertLlama2cOptions } from './convert-llama2c.ts';
import { packIsUpToDate } from './pack-writer.ts';

export interface DemoPaths {
  /** The cloud model's checkpoint (used whole). */
  checkpoint: string;
  /** The edge model's checkpoint, cut to its first `edgeLayers` layers unless that is null. */
  edgeCheckpoint: string;
  edgeLayers: number | null;
  tokenizer: string;
  cloudPack: string;
  edgePack: string;
  tinyStories: string;
  routerPack: string;
  /** τ written to the router's router.json, which the page offers by default. */
  routerThreshold: number;
}

/** The demo routers' training settings: fewer, shorter on-policy rounds than the CLI's defaults, so a test run stays quick. */
const DEMO_ROUTER = { ...DEMO_ROUTER_TRAINING, trainFraction: 0.8, seed: 0, hiddenUnits: 64 };

/**
 * The options `models demo` trains a pair's router with (the tests train copies with them, e.g. under
 * perturbed hidden states, into another `out`).
 *
 * @example
 * await trainRouter({ ...demoRouterOptions(DEMO), out: '/tmp/router' });
 */
export function demoRouterOptions(paths: DemoPaths): TrainRouterOptions {
  return {
    edgeModel: paths.edgePack,
    cloudModel: paths.cloudPack,
    text: paths.tinyStories,
    out: paths.routerPack,
    ...DEMO_ROUTER,
    defaultThreshold: paths.routerThreshold,
    // A stale router is one these tools wrote (its marker says so): rebuilt in place.
    force: true,
  };
}

/**
 * How long training a demo router takes, said as it begins so that a first start does not look stuck:
 * the demo pair's on a 2-core machine without a GPU.
 */
export const TRAINING_ESTIMATE = 'about a minute on 2 cores; once: later runs reuse it';

/** Builds whatever pack of one pair is missing or stale; returns the folders it (re)built. */
export async function buildDemoPacks(paths: DemoPaths = DEMO, log: (line: string) => void = () => {}, progress?: ProgressReporter): Promise<string[]> {
  const built: string[] = [];
  const packs: ConvertLlama2cOptions[] = [
    { checkpoint: paths.checkpoint, tokenizer: paths.tokenizer, out: paths.cloudPack },
    { checkpoint: paths.edgeCheckpoint, tokenizer: paths.tokenizer, out: paths.edgePack, layers: paths.edgeLayers ?? undefined },
  ];
  // A stale pack is one these tools wrote (its marker says so), so it is replaced; a folder they did not write is refused.
  for (const options of packs) {
    if (packIsUpToDate(options.out, llama2cSource(options))) {
      log(`${options.out}: up to date`);
      continue;
    }
    log(`${options.out}: building`);
    await convertLlama2c({ ...options, force: true });
    built.push(options.out);
  }
  const router = demoRouterOptions(paths);
  if (packIsUpToDate(router.out, await routerSource(router), 'router.onnx')) {
    log(`${router.out}: up to date`);
  } else {
    log(`${router.out}: training (${TRAINING_ESTIMATE})`);
    await trainRouter(router, progress);
    built.push(router.out);
  }
  return built;
}

/** Both pairs: the demo pair, then the truncated 3-layer one (they share the cloud pack). */
export async function buildAllDemoPacks(log: (line: string) => void = () => {}, progress?: ProgressReporter): Promise<string[]> {
  return [...(await buildDemoPacks(DEMO, log, progress)), ...(await buildDemoPacks(TRUNCATED_DEMO, log, progress))];
}
