/**
 * The cloud model as teacher forcing reads it: per position of a sequence, the log-probability of the next
 * id, of a candidate (the edge's proposal) and the top-k. Two ways to get it, one answer: in this process
 * from an ONNX pack (`InProcessScorer`), or from a running shim's Score call (`ShimScorer`), whatever backend
 * the shim runs (embedded, SGLang, an OpenAI-compatible server). Both end in src/shared/model/position-scores.ts
 * for the embedded model, so a router trained either way sees the same figures.
 *
 * @example
 * const scorer = await ShimScorer.connect({ address: 'gpu-box:50051', authToken });
 * const positions = await scorer.score(ids, { candidates: proposals, topK: 1 });
 */
import * as grpc from '@grpc/grpc-js';
import { bearer } from '../../shared/grpc/auth.ts';
import { toAppError } from '../../shared/grpc/errors.ts';
import { CloudRouterClient, type CloudRouterClientType, type ScoreResponse__Output } from '../../shared/grpc/proto.ts';
import { clientTls, type ClientTlsFiles } from '../../shared/grpc/tls.ts';
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { scoreOnModel, type PositionScores, type ScoreRowsOptions } from '../../shared/model/position-scores.ts';

export interface CloudScorer {
  /** How reports name it: a pack folder, or `shim HOST:PORT (backend)`. */
  readonly description: string;
  /** The longest sequence one call may hold. */
  readonly maxContext: number;
  /** Rows of the model's output (ids it can score); undefined when the shim does not say. */
  readonly vocabSize: number | undefined;
  /** False once a figure came back as a bound (a remote backend with top-k only); see the proto's ScoreResponse. */
  readonly exact: boolean;
  /** Calls made so far: one per window of a document. */
  readonly calls: number;
  score(ids: readonly number[], options?: ScoreRowsOptions): Promise<PositionScores[]>;
}

/** The cloud pack run here: one forward pass per call, the arithmetic the shim's embedded backend uses. */
export class InProcessScorer implements CloudScorer {
  readonly exact = true;
  calls = 0;

  constructor(
    readonly model: DecoderModel,
    /** A shorter window than the pack's: to read documents in the windows a remote backend of the same model would. */
    private readonly window?: number,
  ) {}

  get description(): string {
    return this.model.pack.dir;
  }

  get maxContext(): number {
    return Math.min(this.model.pack.maxPositions, this.window ?? Infinity);
  }

  get vocabSize(): number {
    return this.model.pack.vocabSize;
  }

  async score(ids: readonly number[], options: ScoreRowsOptions = {}): Promise<PositionScores[]> {
    this.calls++;
    return scoreOnModel(this.model, ids, options);
  }
}

export interface ShimScorerOptions {
  /** `host:port` of the shim. */
  address: string;
  authToken?: string;
  /** CA (PEM) that signed the shim's certificate; turns TLS on. */
  tlsCa?: string;
  /** This client's certificate and key (PEM), for a shim that asks for mutual TLS; both or neither. */
  tlsCert?: string;
  tlsKey?: string;
  /** Deadline of one call (a window of a document). Default 10 min: a busy GPU server queues tools last. */
  callTimeoutMs?: number;
}

/** The TLS files a tool reaches a shim with; undefined: plain text. */
export function shimTlsFiles(options: ShimScorerOptions): ClientTlsFiles | undefined {
  if (!options.tlsCa && !options.tlsCert) return undefined;
  return { caFile: options.tlsCa, certFile: options.tlsCert, keyFile: options.tlsKey };
}

/** The shim's Score call. `connect` asks once with two ids, to learn the window and fail early and clearly. */
export class ShimScorer implements CloudScorer {
  exact = true;
  calls = 0;
  private constructor(
    private readonly client: CloudRouterClientType,
    private readonly options: ShimScorerOptions,
    readonly backend: string,
    readonly maxContext: number,
    /** The shim's vocabulary digest ('' when it has no tokenizer). */
    readonly vocabularySha256: string,
  ) {}

  get description(): string {
    return `shim ${this.options.address} (${this.backend})`;
  }

  get vocabSize(): undefined {
    return undefined;
  }

  static async connect(options: ShimScorerOptions): Promise<ShimScorer> {
    const secure = clientTls(options.address, shimTlsFiles(options));
    const client = new CloudRouterClient(options.address, secure.credentials, { ...secure.options, 'grpc.max_receive_message_length': 64 << 20 });
    try {
      const probe = await call(client, options, { ids: [0, 0], candidateIds: [], topK: 0, vocabLimit: 0, requestId: 'tool-probe' });
      if (probe.maxContext < 2)
        throw new AppError(
          'FAILED_PRECONDITION',
          `the shim at ${options.address} (${probe.backend}) does not say its context window; start it with --max-context`,
        );
      return new ShimScorer(client, options, probe.backend, probe.maxContext, probe.vocabularySha256);
    } catch (e) {
      client.close();
      throw e;
    }
  }

  async score(ids: readonly number[], options: ScoreRowsOptions = {}): Promise<PositionScores[]> {
    this.calls++;
    const reply = await call(this.client, this.options, {
      ids: [...ids],
      candidateIds: options.candidates ? [...options.candidates] : [],
      topK: options.topK ?? 0,
      vocabLimit: options.vocabLimit ?? 0,
      requestId: `tool-${this.calls}`,
    });
    if (!reply.exact) this.exact = false;
    return reply.positions;
  }

  close(): void {
    this.client.close();
  }
}

type ScoreArguments = Parameters<CloudRouterClientType['Score']>[0];

/** One Score call, its failure in words that name the shim and the cause. */
function call(client: CloudRouterClientType, options: ShimScorerOptions, request: ScoreArguments): Promise<ScoreResponse__Output> {
  const metadata = new grpc.Metadata();
  if (options.authToken) metadata.set('authorization', bearer(options.authToken));
  const deadline = Date.now() + (options.callTimeoutMs ?? 10 * 60_000);
  return new Promise((resolve, reject) => {
    client.Score(request, metadata, { deadline }, (error, reply) => {
      if (error || !reply) return reject(scoreFailure(error, options.address));
      resolve(reply);
    });
  });
}

function scoreFailure(error: grpc.ServiceError | null, address: string): AppError {
  const e = toAppError(error ?? new Error('no reply'));
  const at = `the shim at ${address}`;
  switch (e.code) {
    case 'UNIMPLEMENTED':
      // grpc-js's own words for a method the server lacks: a shim older than the Score call.
      return /does not implement the method|unknown method/i.test(e.message)
        ? new AppError('UNIMPLEMENTED', `${at} has no Score call (an older build): update it to train or evaluate through it (${e.message})`)
        : new AppError('UNIMPLEMENTED', `${at} cannot score prompts: ${e.message}`);
    case 'UNAVAILABLE':
      return new AppError('UNAVAILABLE', `cannot reach ${at}: ${e.message}`);
    case 'UNAUTHENTICATED':
      return new AppError('UNAUTHENTICATED', `${at} refused the token (--cloud-token): ${e.message}`);
    default:
      return new AppError(e.code, `${at}: ${errorMessage(e)}`);
  }
}
