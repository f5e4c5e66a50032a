/**
 * The cloud as the tools use it (router training, `router eval`, `eval`, the latency bench): a scorer for
 * teacher forcing and a CloudClient for the decoding loop's generations. Either the cloud pack in this
 * process (`--cloud-model PACK`), or a running shim (`--cloud HOST:PORT`, with `--cloud-token` and
 * `--cloud-tls-ca` as the edge takes them), whatever backend it runs: then the figures describe the cloud
 * model as it is deployed, a 32B model on a GPU server included. Either way the pair must share a
 * vocabulary, checked before anything runs.
 *
 * @example
 * const cloud = await openToolCloud({ shim: { address: 'gpu-box:50051' } }, edgePack, tokenizer);
 * try { await teacherForce({ edgeModel, cloud: cloud.scorer, tokenizer, paragraphs }); } finally { await cloud.close(); }
 */
import type { CloudClient } from '../../edge/cloud/cloud-client.ts';
import { GrpcCloudClient } from '../../edge/cloud/grpc-cloud-client.ts';
import { loadLabModel } from './lab-model.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack, type ModelPack } from '../../shared/model/model-pack.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { vocabularySha256 } from '../../shared/text/vocabulary.ts';
import { InProcessScorer, ShimScorer, shimTlsFiles, type CloudScorer, type ShimScorerOptions } from './cloud-scorer.ts';
import { InProcessCloud } from './in-process-cloud.ts';
import { checkSameVocabulary } from './teacher-forcing.ts';

/** Where the tools find the cloud model. */
export type CloudSource = { pack: string | ModelPack; file?: string } | { shim: ShimScorerOptions };

export interface ToolCloud {
  /** How reports name it: the pack folder, or `shim HOST:PORT (backend)`. */
  readonly description: string;
  readonly scorer: CloudScorer;
  /** The decoding loop's cloud, for generations (evaluation, on-policy rollouts). */
  readonly client: CloudClient;
  /** The cloud pack, when it runs in this process (router.json records its folder). */
  readonly pack: ModelPack | undefined;
  close(): Promise<void>;
}

/**
 * A routed step of a tool may wait behind a whole evaluation's worth of other work on the same machine or
 * GPU server: the product's 5 s would turn a busy moment into fallback tokens, which a tool refuses.
 */
const TOOL_STEP_TIMEOUT_MS = 10 * 60_000;

export async function openToolCloud(source: CloudSource, edgePack: ModelPack, tokenizer: TextTokenizer): Promise<ToolCloud> {
  if ('shim' in source) return openShim(source.shim, edgePack);
  const pack = typeof source.pack === 'string' ? loadModelPack(source.pack, source.file) : source.pack;
  checkSameVocabulary(edgePack, pack);
  const model = await loadLabModel(pack);
  const client = new InProcessCloud(model, { record: false, tokenVocabSize: tokenizer.vocabSize, tokenizer });
  return {
    description: pack.dir,
    scorer: new InProcessScorer(model),
    client,
    pack,
    close: async () => {
      await client.close();
      await model.release();
    },
  };
}

async function openShim(options: ShimScorerOptions, edgePack: ModelPack): Promise<ToolCloud> {
  const scorer = await ShimScorer.connect(options);
  try {
    checkShimVocabulary(scorer, edgePack);
  } catch (e) {
    scorer.close();
    throw e;
  }
  const client = new GrpcCloudClient({
    address: options.address,
    authToken: options.authToken,
    tls: shimTlsFiles(options),
    stepTimeoutMs: TOOL_STEP_TIMEOUT_MS,
    // A tool fails on the first failed step (generation-runs.ts); nothing to recover in the background.
    healthProbe: false,
  });
  return {
    description: scorer.description,
    scorer,
    client,
    pack: undefined,
    close: async () => {
      await client.close();
      scorer.close();
    },
  };
}

function checkShimVocabulary(scorer: ShimScorer, edgePack: ModelPack): void {
  if (scorer.vocabularySha256 === '') {
    throw new AppError(
      'FAILED_PRECONDITION',
      `${scorer.description} has no tokenizer, so nothing shows that it means what ${edgePack.dir} means by each token id: start the shim with --model-pack naming the cloud model's pack (\`bun run models prepare HUB --out PACK --cloud-only\` makes one from a hub download)`,
    );
  }
  if (scorer.vocabularySha256 !== vocabularySha256(edgePack.dir)) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `${edgePack.dir} and ${scorer.description} have different tokenizers: routing needs a pair that shares its tokenizer`,
    );
  }
}
