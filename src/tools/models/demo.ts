/**
 * `models demo`: builds the demo packs from the stories260K checkpoint beside the project:
 * the full 5-layer cloud model, the 3-layer edge model, and the router between them (trained on the
 * first 80% of the TinyStories excerpt). A pack whose recorded source matches is left alone, so
 * re-running is a no-op.
 */
import { DEMO } from '../../shared/paths.ts';
import { DEMO_ROUTER_TRAINING, routerSource, trainRouter, type TrainRouterOptions } from '../router/train-router.ts';
import { convertLlama2c, llama2cSource, type ConvertLlama2cOptions } from './convert-llama2c.ts';
import { packIsUpToDate } from './pack-writer.ts';

export interface DemoPaths {
  checkpoint: string;
  tokenizer: string;
  cloudPack: string;
  edgePack: string;
  edgeLayers: number;
  tinyStories: string;
  routerPack: string;
}

/** The demo router's training settings: fewer, shorter on-policy rounds than the CLI's defaults, so a test run stays quick. */
const DEMO_ROUTER = { ...DEMO_ROUTER_TRAINING, trainFraction: 0.8, seed: 0, hiddenUnits: 64 };

/** Builds whatever demo pack is missing or stale; returns the names of the packs it (re)built. */
export async function buildDemoPacks(paths: DemoPaths = DEMO, log: (line: string) => void = () => {}): Promise<string[]> {
  const built: string[] = [];
  const packs: ConvertLlama2cOptions[] = [
    { checkpoint: paths.checkpoint, tokenizer: paths.tokenizer, out: paths.cloudPack },
    { checkpoint: paths.checkpoint, tokenizer: paths.tokenizer, out: paths.edgePack, layers: paths.edgeLayers },
  ];
  for (const options of packs) {
    if (packIsUpToDate(options.out, llama2cSource(options))) {
      log(`${options.out}: up to date`);
      continue;
    }
    log(`${options.out}: building`);
    await convertLlama2c(options);
    built.push(options.out);
  }
  const router: TrainRouterOptions = { slm: paths.edgePack, llm: paths.cloudPack, text: paths.tinyStories, out: paths.routerPack, ...DEMO_ROUTER };
  if (packIsUpToDate(router.out, await routerSource(router), 'router.onnx')) {
    log(`${router.out}: up to date`);
  } else {
    log(`${router.out}: training`);
    await trainRouter(router);
    built.push(router.out);
  }
  return built;
}
