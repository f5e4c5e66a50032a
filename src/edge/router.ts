/**
 * The router scores how confident the edge model is about its next token: a score in [0, 1], where a
 * score below the threshold τ sends the token to the cloud. Either a trained MLP from a router pack
 * (`router.onnx`: hidden_states [batch, hidden] → score [batch], and `router.json`), or, when no pack is
 * configured, a built-in scorer: the edge model's own top-1 probability.
 */
import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { AppError } from '../shared/errors.ts';
import { readJsonFile } from '../shared/model-pack.ts';
import { ort, type InferenceSession } from '../shared/ort.ts';
import { runSession } from '../shared/run-session.ts';

export interface RouterInfo {
  /** `onnx:<folder>` for a trained router, `builtin:top1-probability` for the fallback scorer. */
  name: string;
  hiddenSize: number | null;
  defaultThreshold: number;
  /** Training figures recorded in router.json, when there are any. */
  training?: Record<string, unknown>;
}

export interface Router {
  readonly info: RouterInfo;
  /** Scores one position from its hidden state and logits. */
  score(hidden: Float32Array, logits: Float32Array): Promise<number>;
  release(): Promise<void>;
}

/** Metadata of a router pack, as written by `bun run router train`. */
export interface RouterJson {
  hidden_size: number;
  slm: string;
  llm?: string;
  default_threshold: number;
  training?: Record<string, unknown>;
}

export class OnnxRouter implements Router {
  private constructor(
    readonly info: RouterInfo,
    private readonly session: InferenceSession,
  ) {}

  static async load(dir: string): Promise<OnnxRouter> {
    const root = resolve(dir);
    const modelPath = join(root, 'router.onnx');
    if (!existsSync(modelPath)) throw new AppError('NOT_FOUND', `${root}: not a router pack (no router.onnx)`);
    const meta = readJsonFile(join(root, 'router.json')) as RouterJson;
    if (!Number.isInteger(meta.hidden_size) || meta.hidden_size <= 0) {
      throw new AppError('INVALID_ARGUMENT', `${join(root, 'router.json')}: hidden_size must be a positive integer`);
    }
    const session = await ort.InferenceSession.create(modelPath, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    return new OnnxRouter(
      // The folder's name only: the name travels in every done event and /api/info, off the device.
      { name: `onnx:${basename(root)}`, hiddenSize: meta.hidden_size, defaultThreshold: meta.default_threshold ?? 0.5, training: meta.training },
      session,
    );
  }

  async score(hidden: Float32Array): Promise<number> {
    if (hidden.length !== this.info.hiddenSize) {
      throw new AppError(
        'FAILED_PRECONDITION',
        `router expects hidden size ${this.info.hiddenSize}, the edge model gave ${hidden.length} (router trained for another model?)`,
      );
    }
    const input = new ort.Tensor('float32', hidden, [1, hidden.length]);
    const out = await runSession(this.session, { hidden_states: input });
    const score = (out.score!.data as Float32Array)[0]!;
    out.score!.dispose();
    return score;
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/** The edge model's top-1 probability: needs no training, and is what "confidence" means by default. */
export class TopProbabilityScorer implements Router {
  readonly info: RouterInfo = { name: 'builtin:top1-probability', hiddenSize: null, defaultThreshold: 0.5 };

  async score(_hidden: Float32Array, logits: Float32Array): Promise<number> {
    return topProbability(logits);
  }

  async release(): Promise<void> {}
}

export function topProbability(logits: Float32Array): number {
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  return 1 / sum;
}

/** A trained router from `dir`, or the built-in scorer when no folder is configured. */
export async function loadRouter(dir: string | undefined): Promise<Router> {
  return dir ? OnnxRouter.load(dir) : new TopProbabilityScorer();
}
