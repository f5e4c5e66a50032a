/**
 * The demo pair loaded for decoder-loop tests: the edge model, the cloud model served by an in-process
 * cloud, and the edge's tokenizer.
 *
 * @example
 * let pair: DemoPairModels;
 * beforeAll(async () => (pair = await loadDemoPairModels({ record: false })));
 * afterAll(() => pair.release());
 */
import { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import { loadModelPack } from '../../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../../src/shared/text/tokenizer.ts';
import { InProcessCloud, type InProcessCloudOptions } from '../../src/tools/lab/in-process-cloud.ts';
import { ensureDemoPacks } from './demo-packs.ts';

export interface DemoPairModels {
  edge: DecoderModel;
  cloudModel: DecoderModel;
  tokenizer: TextTokenizer;
  cloud: InProcessCloud;
  release(): Promise<void>;
}

export async function loadDemoPairModels(cloudOptions: InProcessCloudOptions = {}): Promise<DemoPairModels> {
  const demo = await ensureDemoPacks();
  const edge = await DecoderModel.load(loadModelPack(demo.edgePack));
  const cloudModel = await DecoderModel.load(loadModelPack(demo.cloudPack));
  return {
    edge,
    cloudModel,
    tokenizer: await TextTokenizer.fromPack(demo.edgePack),
    cloud: new InProcessCloud(cloudModel, cloudOptions),
    async release() {
      await edge.release();
      await cloudModel.release();
    },
  };
}
