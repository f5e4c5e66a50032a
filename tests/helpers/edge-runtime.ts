/** An edge runtime over the real demo packs, with the cloud pack served in process. */
import type { CloudClient } from '../../src/edge/cloud/cloud-client.ts';
import type { PrivateDetector } from '../../src/edge/privacy/private-detect.ts';
import { EdgeRuntime } from '../../src/edge/edge-runtime.ts';
import { DEFAULT_LIMITS, type RouteBudget } from '../../src/edge/request/generation-request.ts';
import { loadRouter } from '../../src/edge/routing/router.ts';
import { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import type { Logger } from '../../src/shared/process/logger.ts';
import { PrefixCache } from '../../src/shared/model/prefix-cache.ts';
import { loadModelPack } from '../../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../../src/shared/text/tokenizer.ts';
import { ensureDemoPacks } from './demo-packs.ts';
import { InProcessCloud } from '../../src/tools/lab/in-process-cloud.ts';

export interface TestEdge {
  runtime: EdgeRuntime;
  edgeModel: DecoderModel;
  cloud: InProcessCloud;
  release(): Promise<void>;
}

export async function startTestEdge(
  options: {
    maxConcurrent?: number;
    /** The cloud the edge talks to: the in-process cloud pack (default), none, or a client built around it. */
    cloud?: 'in-process' | 'none' | ((inProcess: InProcessCloud) => CloudClient);
    /** The built-in router, the demo's trained one, or a router pack folder trained for the demo edge model. */
    router?: 'builtin' | 'trained' | { pack: string };
    /** The edge's --speculate setting (what requests that do not say get). */
    speculateByDefault?: boolean | 'auto';
    /** Bytes of the edge's prompt cache; none when omitted. */
    promptCacheBytes?: number;
    /** The edge's --route-* budgets (what requests naming neither τ nor a budget get); none when omitted. */
    defaultBudget?: RouteBudget;
    /** Where the runtime logs each generation (generation-log.ts); nowhere when omitted. */
    log?: Logger;
    /** The edge's --private-detect / --private-pattern detector; the runtime's default (nothing by default) when omitted. */
    privateDetector?: PrivateDetector;
  } = {},
): Promise<TestEdge> {
  const demo = await ensureDemoPacks();
  const edgeModel = await DecoderModel.load(loadModelPack(demo.edgePack));
  const cloudModel = await DecoderModel.load(loadModelPack(demo.cloudPack));
  const inProcess = new InProcessCloud(cloudModel);
  const cloud = options.cloud === 'none' ? undefined : typeof options.cloud === 'function' ? options.cloud(inProcess) : inProcess;
  const router = await loadRouter(options.router === 'trained' ? demo.routerPack : typeof options.router === 'object' ? options.router.pack : undefined);
  const runtime = new EdgeRuntime(
    {
      edgeModel,
      router,
      tokenizer: await TextTokenizer.fromPack(demo.edgePack),
      cloud,
      speculation: { byDefault: options.speculateByDefault },
      promptCache: options.promptCacheBytes ? new PrefixCache(edgeModel, { maxBytes: options.promptCacheBytes }) : undefined,
      privateDetector: options.privateDetector,
    },
    { ...DEFAULT_LIMITS, maxConcurrent: options.maxConcurrent ?? 4, defaultBudget: options.defaultBudget },
    options.log,
  );
  return {
    runtime,
    edgeModel,
    cloud: inProcess,
    async release() {
      await runtime.shutdown();
      await router.release();
      await edgeModel.release();
      await cloudModel.release();
    },
  };
}
