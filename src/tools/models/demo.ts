/**
 * `models demo`: builds the demo packs from the stories260K checkpoints beside the project. The chat pair
 * (CHAT_DEMO, what `bun run start` serves): the chat-tuned 1-layer student on the edge, the chat-tuned
 * 5-layer model in the cloud, both packs with the pair's chat template, and the router between them
 * trained on conversations. The story pair (DEMO): the 1-layer distilled student on the edge, the full
 * 5-layer model in the cloud, and the router between them (trained on the first 80% of the TinyStories
 * excerpt). The truncated pair (TRUNCATED_DEMO): the first 3 layers of the 5-layer model, untrained, with
 * its own router. A pack whose recorded source matches is left alone, so re-running is a no-op.
 *
 * Training a router is the long step (the first `bun run start` waits for it; converting a pack takes
 * moments): `log` says so and about how long as it begins (TRAINING_ESTIMATE), and the training tells
 * `progress` how far it is.
 *
 * @example
 * await buildDemoPacks(CHAT_DEMO);                // the chat pair only (what `bun run start` needs)
 * await buildAllDemoPacks((line) => console.log(line), progressFor());   // every pair (`bun run models demo`)
 */
import { CHAT_DEMO, DEMO, TRUNCATED_DEMO } from '../../shared/paths.ts';
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
  /** A Jinja file that both packs get as chat_template.jinja; null for a plain-text pair. */
  chatTemplate: string | null;
  cloudPack: string;
  edgePack: string;
  /** The router's training text (plain text or a chat dataset) and the share of its documents trained on. */
  routerText: string;
  routerTrainFraction: number;
  routerPack: string;
  /** τ written to the router's router.json, which the page offers by default. */
  routerThreshold: number;
}

/** The demo routers' training settings: fewer, shorter on-policy rounds than the CLI's defaults, so a test run stays quick. */
const DEMO_ROUTER = { ...DEMO_ROUTER_TRAINING, seed: 0, hiddenUnits: 64 };

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
    text: paths.routerText,
    out: paths.routerPack,
    ...DEMO_ROUTER,
    trainFraction: paths.routerTrainFraction,
    // The packs hold the template too; naming the file records it in the router's source.
    ...(paths.chatTemplate === null ? {} : { chatTemplate: paths.chatTemplate }),
    defaultThreshold: paths.routerThreshold,
    // A stale router is one these tools wrote (its marker says so): rebuilt in place.
    force: true,
  };
}

/**
 * How long training a demo router takes, said as it begins so that a first start does not look stuck:
 * on a 2-core machine without a GPU, the story pair's takes the shorter, the chat pair's (longer
 * sequences: whole conversations, rollouts from their turns) the longer.
 */
export const TRAINING_ESTIMATE = 'one to two minutes on 2 cores; once: later runs reuse it';

/** Builds whatever pack of one pair is missing or stale; returns the folders it (re)built. */
export async function buildDemoPacks(paths: DemoPaths = DEMO, log: (line: string) => void = () => {}, progress?: ProgressReporter): Promise<string[]> {
  const built: string[] = [];
  const packs: ConvertLlama2cOptions[] = [
    { checkpoint: paths.checkpoint, tokenizer: paths.tokenizer, out: paths.cloudPack },
    { checkpoint: paths.edgeCheckpoint, tokenizer: paths.tokenizer, out: paths.edgePack, layers: paths.edgeLayers ?? undefined },
  ].map((pack) => (paths.chatTemplate === null ? pack : { ...pack, chatTemplate: paths.chatTemplate }));
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

/** Every pair: the story pair, the truncated 3-layer one (they share the cloud pack), then the chat pair. */
export async function buildAllDemoPacks(log: (line: string) => void = () => {}, progress?: ProgressReporter): Promise<string[]> {
  const built: string[] = [];
  for (const paths of [DEMO, TRUNCATED_DEMO, CHAT_DEMO]) built.push(...(await buildDemoPacks(paths, log, progress)));
  return built;
}
