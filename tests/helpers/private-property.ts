/**
 * The privacy property's rig: an edge model, a shim over the SGLang stand-in computing with a cloud model,
 * and a cloud client that keeps every Route message it writes, as a proxy between edge and shim would see
 * them. `leaks` decodes what left (each stream's ids as the shim received them, the backend's requests, the
 * shim's debug log, the text the cloud saw) and looks for every value, as typed and folded the way a
 * tokenizer could hand it back (NFC, NFKC, spaces, marks).
 *
 * @example
 * const rig = await PrivacyRig.start({ edgePack, cloudPack, tokenizer });
 * const { done, wire } = await rig.run(privateCase(7, stories), values);
 * rig.leaks(c.values, wire, done); // [] when nothing left
 */
import type { ShimServer } from '../../src/cloud/shim-server.ts';
import { GrpcCloudClient } from '../../src/edge/cloud/grpc-cloud-client.ts';
import type { RouteStream } from '../../src/edge/cloud/live-route-stream.ts';
import { generate, type DoneEvent, type LoopRequest } from '../../src/edge/loop/decoder-loop.ts';
import { foldString } from '../../src/edge/privacy/folded-text.ts';
import type { PrivateValues } from '../../src/edge/privacy/private-values.ts';
import { parseGenerationRequest } from '../../src/edge/request/generation-request.ts';
import { TopProbabilityScorer } from '../../src/edge/routing/router.ts';
import { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import type { RouteRequest } from '../../src/shared/grpc/proto.ts';
import { createLogger } from '../../src/shared/process/logger.ts';
import { loadModelPack } from '../../src/shared/model/model-pack.ts';
import type { TextTokenizer } from '../../src/shared/text/tokenizer.ts';
import { startTestShim } from './cloud-fixture.ts';
import { FakeSglang } from './cloud-fake-sglang.ts';
import type { PrivateCase } from './private-cases.ts';

/** A cloud client that keeps, per stream, every message it writes: what a recording proxy would read. */
class WireRecordingClient extends GrpcCloudClient {
  streams: RouteRequest[][] = [];
  override startStream(): RouteStream {
    const stream = super.startStream();
    const messages: RouteRequest[] = [];
    this.streams.push(messages);
    const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      messages.push(chunk as RouteRequest);
      return write(chunk, ...rest);
    }) as typeof stream.write;
    return stream;
  }
}

/** The ids each stream's messages carried, in the shim's order (open's context, then each step's ids at its offset). */
function idsPerStream(streams: readonly RouteRequest[][]): number[][] {
  return streams.map((messages) => {
    const ids: number[] = [];
    for (const m of messages) {
      if (m.open) ids.push(...(m.open.contextIds ?? []));
      if (m.step?.ids) ids.push(...m.step.ids);
    }
    return ids;
  });
}

export class PrivacyRig {
  private constructor(
    /** The shim's log lines at debug level. */
    readonly shimLog: string[],
    readonly tokenizer: TextTokenizer,
    private readonly edge: DecoderModel,
    private readonly cloudModel: DecoderModel,
    readonly sglang: FakeSglang,
    private readonly shim: ShimServer,
    readonly client: WireRecordingClient,
  ) {}

  static async start(o: { edgePack: string; cloudPack: string; tokenizer: TextTokenizer }): Promise<PrivacyRig> {
    const [edge, cloudModel] = await Promise.all([DecoderModel.load(loadModelPack(o.edgePack)), DecoderModel.load(loadModelPack(o.cloudPack))]);
    const sglang = new FakeSglang(cloudModel, o.tokenizer);
    const log: string[] = [];
    const shim = await startTestShim(
      { backend: 'sglang', backendUrl: sglang.url, modelPack: o.cloudPack },
      { log: createLogger('shim', 'debug', (line) => void log.push(line)) },
    );
    const client = new WireRecordingClient({ address: shim.address, stepTimeoutMs: 30_000 });
    return new PrivacyRig(log, o.tokenizer, edge, cloudModel, sglang, shim, client);
  }

  async stop(): Promise<void> {
    await this.client.close();
    await this.shim.shutdown();
    await this.sglang.stop();
    await this.edge.release();
    await this.cloudModel.release();
  }

  /** Runs one case; returns its done event, the ids it generated and the ids each stream it opened sent. */
  async run(c: PrivateCase, privateValues: PrivateValues | undefined): Promise<{ done: DoneEvent; ids: number[]; wire: number[][] }> {
    this.client.streams = [];
    const engine = { edgeModel: this.edge, router: new TopProbabilityScorer(), tokenizer: this.tokenizer, cloud: this.client, speculation: { depth: 4 } };
    const request: LoopRequest = parseGenerationRequest({ prompt: c.prompt, ...c.settings });
    if (privateValues) request.privateValues = privateValues;
    const ids: number[] = [];
    for await (const event of generate(engine, request)) {
      if (event.type === 'done') return { done: event, ids, wire: idsPerStream(this.client.streams) };
      ids.push(event.id);
    }
    throw new Error('no done event');
  }

  /**
   * The values found in what left during a case: the streams' ids, the backend's requests and the shim's
   * log lines since `marks`, and the cloud's text; as typed, and folded.
   */
  leaks(values: readonly string[], wire: readonly number[][], done: DoneEvent, marks: { requests: number; log: number }): string[] {
    const seen = [
      ...wire.map((ids) => this.tokenizer.decode(ids)),
      ...this.sglang.requests.slice(marks.requests).map((body) => JSON.stringify(body) + this.tokenizer.decode((body.input_ids as number[] | undefined) ?? [])),
      ...this.shimLog.slice(marks.log),
      done.cloudText,
    ];
    const folded = seen.map((text) => foldString(text, false));
    return values.filter((value) => seen.some((text) => text.includes(value)) || folded.some((text) => text.includes(foldString(value, false))));
  }

  marks(): { requests: number; log: number } {
    return { requests: this.sglang.requests.length, log: this.shimLog.length };
  }
}
