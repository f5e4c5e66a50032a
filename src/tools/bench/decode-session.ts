/**
 * One pack loaded for `bench decode`: the prompt prefilled (median of 3 after one untimed), then decode
 * steps on request, each feeding the greedy token. `bench decode` asks for its warm-up and rounds in one
 * go; under `--peer` a child process holds a session between the rounds the parent alternates with
 * llama.cpp's. Each round first measures the copy bandwidth (unless a figure was given), so the bound and
 * the steps see the same machine.
 *
 * @example
 * const session = await DecodeSession.open({ target: 'pack', dir, threads: 2, promptTokens: 100, plannedSteps: 36, copyBytes: 2 ** 30, log });
 * await session.warmUp(4);
 * const stepsMs = await session.runRound(8);
 * const result = session.result();
 * await session.close();
 */
import { DecoderModel, type DecoderSequence } from '../../shared/model/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import { argmax } from '../../shared/model/logits.ts';
import { loadModelPack, type ModelPack } from '../../shared/model/model-pack.ts';
import { median, percentile } from '../../shared/statistics.ts';
import { copyBuffers, CopyTeam, singleThreadCopyBandwidth } from './decode-bandwidth.ts';
import type { DecodeBenchResult, DecodeRound } from './decode-report.ts';
import { promptIds } from './decode-target.ts';
import { peakRssMb } from './peak-rss.ts';
import { kvCacheBytes, weightTraffic } from './decode-weights.ts';
import { WeightKernels } from './decode-kernel-floor.ts';

export interface DecodeSessionOptions {
  target: string;
  dir: string;
  threads: number;
  promptTokens: number;
  /** Warm-up and measured steps the caller will ask for, checked against the model's positions. */
  plannedSteps: number;
  /** Bytes of each copy buffer: the main thread's, and all workers' together. */
  copyBytes: number;
  /** Copy bandwidth measured elsewhere (GB/s, read + written): no copy buffers are made, so peak RSS is the model's. */
  bandwidthGbS?: number;
  /** Also time the pack's weight products alone after each round's steps (decode-kernel-floor.ts). */
  kernelFloor?: boolean;
  log: (line: string) => void;
}

/** Passes through the weight products timed after each round's steps (their median is the round's floor). */
const FLOOR_RUNS = 8;

export class DecodeSession {
  private readonly steps: number[] = [];
  private readonly rounds: DecodeRound[] = [];
  private warmedUp = 0;

  private constructor(
    private readonly o: DecodeSessionOptions,
    private readonly pack: ModelPack,
    private readonly traffic: ReturnType<typeof weightTraffic>,
    private readonly model: DecoderModel,
    private readonly sequence: DecoderSequence,
    private logits: Float32Array,
    readonly loadMs: number,
    readonly prefillMs: number,
    private readonly buffers: ReturnType<typeof copyBuffers> | undefined,
    private readonly team: CopyTeam | undefined,
    private readonly floor: WeightKernels | undefined,
  ) {}

  static async open(o: DecodeSessionOptions): Promise<DecodeSession> {
    const pack = loadModelPack(o.dir);
    if (o.promptTokens + o.plannedSteps > pack.maxPositions) {
      throw new AppError('INVALID_ARGUMENT', `prompt + warm-up + steps exceed the model's ${pack.maxPositions} positions`);
    }
    const traffic = weightTraffic(pack.modelPath);
    const ids = await promptIds(pack, o.promptTokens);
    const given = o.bandwidthGbS;
    if (given === undefined) o.log(`copy buffers: ${o.copyBytes / 2 ** 20} MiB on this thread, the same split over ${o.threads} workers`);
    const buffers = given === undefined ? copyBuffers(o.copyBytes) : undefined;
    const team = given === undefined ? await CopyTeam.start(o.threads, o.copyBytes / o.threads) : undefined;
    o.log(`loading ${o.dir} (${(traffic.total / 2 ** 20).toFixed(0)} MiB of weights, ${o.threads} threads)`);
    const loadStart = performance.now();
    let model: DecoderModel | undefined;
    let sequence: DecoderSequence | undefined;
    let floor: WeightKernels | undefined;
    try {
      model = await DecoderModel.load(pack, { threads: o.threads });
      const loadMs = performance.now() - loadStart;
      if (o.kernelFloor) {
        floor = await WeightKernels.open(pack.modelPath, o.threads);
        o.log(`kernel floor: the ${floor.nodes} weight products alone, ${FLOOR_RUNS} passes after each round`);
      }
      const prefills: number[] = [];
      let logits: Float32Array = new Float32Array(0);
      for (let run = 0; run < 4; run++) {
        sequence?.dispose();
        sequence = model.newSequence();
        const t = performance.now();
        ({ logits } = await sequence.append(ids));
        if (run > 0) prefills.push(performance.now() - t);
      }
      o.log(`prefill ${o.promptTokens} tokens: ${median(prefills).toFixed(1)} ms`);
      return new DecodeSession(o, pack, traffic, model, sequence!, logits, loadMs, median(prefills), buffers, team, floor);
    } catch (e) {
      sequence?.dispose();
      await floor?.release();
      await model?.release();
      team?.close();
      throw e;
    }
  }

  async warmUp(steps: number): Promise<void> {
    for (let i = 0; i < steps; i++) await this.decode();
    this.warmedUp += steps;
  }

  /**
   * Measures the copy bandwidth (unless given), then decodes `steps` tokens, then (with `kernelFloor`) times
   * the weight products alone; returns each step's milliseconds.
   */
  async runRound(steps: number): Promise<number[]> {
    const singleThreadGbS = this.buffers ? singleThreadCopyBandwidth(this.buffers, 3) : this.o.bandwidthGbS!;
    const allThreadsGbS = this.team && this.o.threads > 1 ? await this.team.measure(600) : singleThreadGbS;
    const mine: number[] = [];
    for (let i = 0; i < steps; i++) mine.push(await this.decode());
    this.steps.push(...mine);
    const kernelFloorMs = this.floor ? await this.floor.time(FLOOR_RUNS) : undefined;
    this.rounds.push({ msPerToken: median(mine), singleThreadGbS, allThreadsGbS, ...(kernelFloorMs === undefined ? {} : { kernelFloorMs }) });
    return mine;
  }

  /** The figures of every round run so far. */
  result(): DecodeBenchResult {
    if (this.steps.length === 0) throw new AppError('FAILED_PRECONDITION', 'no round has been run');
    const singleThread = median(this.rounds.map((r) => r.singleThreadGbS));
    const allThreads = median(this.rounds.map((r) => r.allThreadsGbS));
    const bandwidth = Math.max(singleThread, allThreads);
    const msPerToken = median(this.steps);
    // Step j reads the cache of prompt + warm-up + j tokens plus its own.
    const kvBytes = kvCacheBytes(this.pack, this.o.promptTokens + this.warmedUp + (this.steps.length + 1) / 2);
    const boundMsPerToken = ((this.traffic.perToken + kvBytes) / (bandwidth * 1e9)) * 1000;
    return {
      target: this.o.target,
      pack: this.o.dir,
      threads: this.o.threads,
      promptTokens: this.o.promptTokens,
      steps: this.steps.length,
      loadMs: this.loadMs,
      prefillMs: this.prefillMs,
      msPerToken,
      msPerTokenP90: percentile(this.steps, 90),
      minMsPerToken: Math.min(...this.steps),
      tokensPerSecond: 1000 / msPerToken,
      weightBytes: this.traffic.perToken,
      kvBytes,
      bandwidth: { singleThread, allThreads, used: bandwidth },
      rounds: this.rounds,
      boundMsPerToken,
      fractionOfBound: boundMsPerToken / msPerToken,
      ...(this.floor ? { kernelFloorMs: median(this.rounds.map((r) => r.kernelFloorMs!)) } : {}),
      peakRssMb: peakRssMb(),
    };
  }

  async close(): Promise<void> {
    this.sequence.dispose();
    await this.floor?.release();
    await this.model.release();
    this.team?.close();
  }

  private async decode(): Promise<number> {
    const next = argmax(this.logits);
    const t = performance.now();
    ({ logits: this.logits } = await this.sequence.append([next]));
    return performance.now() - t;
  }
}
