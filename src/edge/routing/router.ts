/**
 * The router scores how confident the edge model is about its next token: a score in [0, 1], where a
 * score below the threshold τ sends the token to the cloud. Either a trained MLP from a router pack
 * (`router.onnx`: hidden_states [batch, hidden] and, for packs that read more than the hidden state,
 * previous_hidden_states [batch, hidden], extra_features [batch, k] and proposed_token [batch] → score
 * [batch]; `router.json` names the feature groups, see router-features.ts), or, when no pack is configured, a built-in scorer: the edge model's own top-1
 * probability.
 *
 * @example
 * const router = await loadRouter('models/router-stories260k-3l');
 * const score = await router.score(last.hidden, last.logits, context, last.previousHidden); // route when score < τ
 */
import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { AppError } from '../../shared/errors.ts';
import { topProbability } from '../../shared/model/logits.ts';
import { readJsonFile } from '../../shared/model/model-pack.ts';
import { ort, type InferenceSession, type OrtTensor } from '../../shared/model/ort.ts';
import { runSession } from '../../shared/model/run-session.ts';
import type { EdgeModelIdentity } from './edge-model-identity.ts';
import { LogitSums, ONNX_SUMS_MIN_LENGTH } from './logit-sums.ts';
import {
  extraWidth,
  logitExtremes,
  logitSums,
  parseFeatureGroups,
  readsPreviousHidden,
  readsToken,
  statsFromSums,
  writeExtraFeatures,
  type FeatureGroup,
} from './router-features.ts';
import { DEFAULT_ROUTER_THRESHOLD } from '../../shared/contract/router-threshold.ts';

export interface RouterInfo {
  /** `onnx:<folder>` for a trained router, `builtin:top1-probability` for the fallback scorer. */
  name: string;
  hiddenSize: number | null;
  defaultThreshold: number;
  /** Training figures recorded in router.json, when there are any. */
  training?: Record<string, unknown>;
  /** The feature groups the router reads (`['hidden']` for packs older than the field). */
  features?: readonly FeatureGroup[];
}

export interface Router {
  readonly info: RouterInfo;
  /**
   * Scores one position from its hidden state and logits; `recentIds` are the ids of the sequence up to
   * it (prompt included), which routers with repetition and position features read, and
   * `previousHidden` the hidden state of the position before it (`AppendResult.previousHidden`). Callers
   * that omit them score as if the position were the sequence's first.
   */
  score(hidden: Float32Array, logits: Float32Array, recentIds?: readonly number[], previousHidden?: Float32Array): Promise<number>;
  release(): Promise<void>;
}

/** Metadata of a router pack, as written by `bun run router train`. */
export interface RouterJson {
  hidden_size: number;
  slm: string;
  llm?: string;
  default_threshold: number;
  /** The edge model it was trained on (absent from packs older than the field): the edge refuses it on any other. */
  edge_model?: EdgeModelIdentity;
  /** Feature groups, `hidden` first; absent = `['hidden']`. */
  features?: FeatureGroup[];
  training?: Record<string, unknown>;
}

/**
 * A trained router pack at run time: router.onnx, one position per call, fed as the decoding loop feeds
 * it. The tools score the same graph in batches (src/tools/router/batch-scorer.ts) and train with its
 * TypeScript twin (MlpRouter); tests pin the three to the same scores.
 */
export class OnnxRouter implements Router {
  private constructor(
    readonly info: RouterInfo,
    private readonly session: InferenceSession,
    private readonly features: readonly FeatureGroup[],
    /** Computes the exponential sums of long logit rows (large vocabularies); null for hidden-only routers. */
    private readonly sums: LogitSums | null,
  ) {}

  static async load(dir: string): Promise<OnnxRouter> {
    const root = resolve(dir);
    const modelPath = join(root, 'router.onnx');
    if (!existsSync(modelPath)) throw new AppError('NOT_FOUND', `${root}: not a router pack (no router.onnx)`);
    const meta = readJsonFile(join(root, 'router.json')) as RouterJson;
    if (!Number.isInteger(meta.hidden_size) || meta.hidden_size <= 0) {
      throw new AppError('INVALID_ARGUMENT', `${join(root, 'router.json')}: hidden_size must be a positive integer`);
    }
    const features = parseFeatureGroups(meta.features, join(root, 'router.json'));
    const session = await ort.InferenceSession.create(modelPath, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    const wantsExtra = extraWidth(features) > 0;
    const inputs = session.inputNames;
    if (
      wantsExtra !== inputs.includes('extra_features') ||
      readsToken(features) !== inputs.includes('proposed_token') ||
      readsPreviousHidden(features) !== inputs.includes('previous_hidden_states')
    ) {
      await session.release();
      throw new AppError(
        'INVALID_ARGUMENT',
        `${root}: router.json's features (${features.join(', ')}) do not match router.onnx's inputs (${session.inputNames.join(', ')})`,
      );
    }
    const sums = wantsExtra
      ? await LogitSums.create().catch(async (e) => {
          await session.release();
          throw e;
        })
      : null;
    return new OnnxRouter(
      // The folder's name only: the name travels in every done event and /api/info, off the device.
      {
        name: `onnx:${basename(root)}`,
        hiddenSize: meta.hidden_size,
        defaultThreshold: meta.default_threshold ?? DEFAULT_ROUTER_THRESHOLD,
        training: meta.training,
        features,
      },
      session,
      features,
      sums,
    );
  }

  async score(hidden: Float32Array, logits?: Float32Array, recentIds: readonly number[] = [], previousHidden?: Float32Array): Promise<number> {
    if (hidden.length !== this.info.hiddenSize) {
      throw new AppError(
        'FAILED_PRECONDITION',
        `router expects hidden size ${this.info.hiddenSize}, the edge model gave ${hidden.length} (router trained for another model?)`,
      );
    }
    const feeds: Record<string, OrtTensor> = { hidden_states: new ort.Tensor('float32', hidden, [1, hidden.length]) };
    if (readsPreviousHidden(this.features)) {
      if (previousHidden && previousHidden.length !== hidden.length) {
        throw new AppError(
          'FAILED_PRECONDITION',
          `${this.info.name}: the previous hidden state has ${previousHidden.length} values, the current one ${hidden.length}`,
        );
      }
      feeds.previous_hidden_states = new ort.Tensor('float32', previousHidden ?? new Float32Array(hidden.length), [1, hidden.length]);
    }
    const width = extraWidth(this.features);
    const token = readsToken(this.features);
    if (width > 0 || token) {
      if (!logits) throw new AppError('FAILED_PRECONDITION', `${this.info.name} reads the edge model's logits; the caller gave none`);
      const extremes = logitExtremes(logits);
      if (token) feeds.proposed_token = new ort.Tensor('int64', BigInt64Array.of(BigInt(extremes.argmax)), [1]);
      if (width > 0) {
        const sums = this.sums && logits.length >= ONNX_SUMS_MIN_LENGTH ? await this.sums.compute(logits, extremes.max) : logitSums(logits, extremes.max);
        // A fresh buffer per call (8 floats): calls of concurrent generations may overlap across the awaits.
        const extra = writeExtraFeatures(new Float32Array(width), this.features, statsFromSums(extremes, sums), recentIds);
        feeds.extra_features = new ort.Tensor('float32', extra, [1, width]);
      }
    }
    const out = await runSession(this.session, feeds);
    const score = (out.score!.data as Float32Array)[0]!;
    out.score!.dispose();
    return score;
  }

  async release(): Promise<void> {
    await this.session.release();
    await this.sums?.release();
  }
}

/**
 * The edge model's top-1 probability: needs no training, and is what "confidence" means by default. It
 * is 1 / Σ exp(x − max); over a long row (a 151,936-token vocabulary) the exponentials go to onnxruntime
 * (logit-sums.ts), made on the first such row: in JavaScript they were a large share of the time a
 * batched q4 decode step spent outside its forward pass.
 */
export class TopProbabilityScorer implements Router {
  readonly info: RouterInfo = { name: 'builtin:top1-probability', hiddenSize: null, defaultThreshold: DEFAULT_ROUTER_THRESHOLD };
  private sums: Promise<LogitSums> | undefined;

  async score(_hidden: Float32Array, logits: Float32Array): Promise<number> {
    if (logits.length < ONNX_SUMS_MIN_LENGTH) return topProbability(logits);
    this.sums ??= LogitSums.create();
    const { z } = await (await this.sums).compute(logits, logitExtremes(logits).max);
    return 1 / z;
  }

  async release(): Promise<void> {
    const sums = this.sums;
    this.sums = undefined;
    await (await sums)?.release();
  }
}

/** A trained router from `dir`, or the built-in scorer when no folder is configured. */
export async function loadRouter(dir: string | undefined): Promise<Router> {
  return dir ? OnnxRouter.load(dir) : new TopProbabilityScorer();
}
