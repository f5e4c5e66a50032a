/**
 * The records of teacher forcing: one per position of a sequence both models read, holding the edge
 * model's hidden state and extra router features there, whether each model's top-1 is the true next
 * token, and how likely the cloud finds the edge's top-1. Teacher forcing over text (teacher-forcing.ts)
 * and the router's on-policy rounds (which force generated trajectories) both collect them here.
 *
 * @example
 * const records = new ForcedRecords(edgeModel, new InProcessScorer(cloudModel)); // or a ShimScorer
 * await records.addSequence(ids, 0);
 * const forced = records.build(); // forced.count records
 */
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import { argmax } from '../../shared/model/logits.ts';
import type { CloudScorer } from './cloud-scorer.ts';
import { completesSeenNgram, logitStats, REPETITION_WINDOW, writeExtraFeatures } from '../../edge/routing/router-features.ts';
import { ALL_EXTRA_GROUPS, ALL_EXTRA_WIDTH } from './feature-matrix.ts';

/** How far back `repeatsFourGram` looks: a whole rollout (prompt and generated tokens), at a bounded cost on long text. */
export const LOOP_WINDOW = 256;

/** Whether proposing `next` after `ids[0..position]` completes a 4-gram seen earlier (in the last LOOP_WINDOW ids). */
export function repeatsFourGramAt(ids: readonly number[], position: number, next: number): boolean {
  return completesSeenNgram(ids.slice(Math.max(0, position + 1 - LOOP_WINDOW), position + 1), next, 4);
}

export interface TeacherForced {
  hiddenSize: number;
  /** Number of positions (records). */
  count: number;
  /** Edge hidden states, `[count, hiddenSize]` row-major. */
  hidden: Float32Array;
  /** The edge's hidden state at each record's previous position (zeros at a sequence's first), `[count, hiddenSize]`. */
  previousHidden: Float32Array;
  /** Every extra router feature (`ALL_EXTRA_GROUPS` of feature-matrix.ts), `[count, ALL_EXTRA_WIDTH]`. */
  extra: Float32Array;
  /** 1 where the model's top-1 equals the true next token. */
  edgeCorrect: Uint8Array;
  cloudCorrect: Uint8Array;
  /** The cloud's probability of the edge's top-1, and of its own top-1: the divergence labels' inputs. */
  cloudProbOfEdgeTop1: Float32Array;
  cloudTopProb: Float32Array;
  /** The edge's top-1 at each position: the token it proposes (the router's `token` input). */
  proposed: Int32Array;
  /** The cloud's top-1 at each position: what a route there would write. */
  cloudTop: Int32Array;
  /** 1 where the edge's top-1 completes a 4-gram seen earlier in the sequence (its last LOOP_WINDOW ids): a loop's next step. */
  repeatsFourGram: Uint8Array;
  /** 1 where the cloud's top-1 completes a 4-gram seen earlier: a route there would take a loop one step further. */
  cloudRepeatsFourGram: Uint8Array;
  /** The true next token of each position. */
  nextId: Int32Array;
  /** Index (into the given paragraphs) of the paragraph each record comes from. */
  paragraph: Int32Array;
  /** Paragraphs longer than the shorter context window, scored in consecutive windows. */
  windowed: number;
}

/** One sequence to teacher-force: records at `positions` only when given, else at every position. */
export interface ForcedSequence {
  ids: readonly number[];
  positions?: readonly number[];
}

/** Which positions of a sequence become records: from `first` on, or only `positions` (a chat's assistant ones). */
export interface SequenceOptions {
  first?: number;
  positions?: readonly number[];
}

/** One record before it is added: what both models said at one position. */
interface ForcedRow {
  hidden: Float32Array;
  previousHidden: Float32Array;
  extra: Float32Array;
  edgeCorrect: number;
  cloudCorrect: number;
  cloudProbOfEdgeTop1: number;
  cloudTopProb: number;
  proposed: number;
  cloudTop: number;
  repeatsFourGram: number;
  cloudRepeatsFourGram: number;
  nextId: number;
}

/** A sequence as both models read it (`ForcedRecords.read`). */
export interface SequenceReading {
  rows: ForcedRow[];
  /** Longer than the shorter window: read in consecutive windows. */
  windowed: boolean;
}

async function forward(model: DecoderModel, ids: number[]): Promise<{ logits: Float32Array; hidden: Float32Array }> {
  const sequence = model.newSequence();
  try {
    const out = await sequence.append(ids, { allPositions: true });
    return { logits: out.allLogits!, hidden: out.allHidden! };
  } finally {
    sequence.dispose();
  }
}

/** Collects records position by position and packs them into a `TeacherForced`. */
export class ForcedRecords {
  private readonly hiddenRows: Float32Array[] = [];
  private readonly previousHiddenRows: Float32Array[] = [];
  private readonly extraRows: Float32Array[] = [];
  private readonly edgeCorrect: number[] = [];
  private readonly cloudCorrect: number[] = [];
  private readonly cloudProbOfEdgeTop1: number[] = [];
  private readonly cloudTopProb: number[] = [];
  private readonly proposed: number[] = [];
  private readonly cloudTop: number[] = [];
  private readonly repeatsFourGram: number[] = [];
  private readonly cloudRepeatsFourGram: number[] = [];
  private readonly nextId: number[] = [];
  private readonly paragraph: number[] = [];
  windowed = 0;

  constructor(
    readonly edgeModel: DecoderModel,
    readonly cloud: CloudScorer,
  ) {
    if (!edgeModel.hasHiddenStates) {
      throw new AppError(
        'FAILED_PRECONDITION',
        `${edgeModel.pack.dir}: the edge model has no hidden_states output (add it with: bun run models expose-hidden)`,
      );
    }
  }

  get count(): number {
    return this.edgeCorrect.length;
  }

  /** Positions past the shorter window cannot be scored by both models in one pass. */
  get maxLength(): number {
    return Math.min(this.edgeModel.pack.maxPositions, this.cloud.maxContext);
  }

  /**
   * Forces both models along `ids` and records the positions from `first` on (each predicts the id after
   * it), or only `positions` when given (a chat's assistant positions). A sequence longer than
   * the window is read in consecutive windows, each starting where the last one's final prediction was
   * due, so every token is predicted exactly once; a window with no position to record is not run. Each
   * window is a sequence of its own for the models, so its first position has no previous hidden state and
   * position 0. The cloud reads each window once (one Score call through a shim), asked for the edge's
   * proposals there.
   */
  async addSequence(ids: readonly number[], paragraph: number, options: SequenceOptions = {}): Promise<void> {
    this.add(await this.read(ids, options), paragraph);
  }

  /**
   * Both models' reading of a sequence (`addSequence` without the adding): the records' rows, each
   * position's logits already reduced to what a record keeps, so several readings can be in flight at once
   * (teacher-forcing.ts keeps a few, so the edge reads one sequence while the cloud scores another).
   */
  async read(ids: readonly number[], options: SequenceOptions = {}): Promise<SequenceReading> {
    const first = options.first ?? 0;
    const wanted = options.positions ? new Set(options.positions) : undefined;
    const recorded = (position: number) => position >= first && (wanted === undefined || wanted.has(position));
    const hiddenSize = this.edgeModel.pack.hiddenSize;
    // Each model's logits rows are as wide as its embedding; exports pad it differently (Qwen2.5-0.5B 151,936
    // rows, the 7B and 32B 152,064) over the same tokenizer, so top-1 is taken over the ids both have.
    const edgeRow = this.edgeModel.pack.vocabSize;
    const shared = Math.min(edgeRow, this.cloud.vocabSize ?? edgeRow);
    const window = this.maxLength;
    const rows: ForcedRow[] = [];
    for (let start = 0; start + 1 < ids.length; start += window - 1) {
      const chunk = ids.slice(start, start + window);
      if (!chunk.some((_, i) => i + 1 < chunk.length && recorded(start + i))) continue;
      const edge = await forward(this.edgeModel, chunk);
      const proposals = Array.from({ length: chunk.length - 1 }, (_, i) => argmax(edge.logits.subarray(i * edgeRow, i * edgeRow + shared)));
      const cloud = await this.cloud.score(chunk, { candidates: proposals, topK: 1, vocabLimit: shared });
      if (edge.hidden.length !== chunk.length * hiddenSize) {
        throw new AppError(
          'FAILED_PRECONDITION',
          `${this.edgeModel.pack.dir}: hidden_states has ${edge.hidden.length / chunk.length} values per position, config.json says hidden_size ${hiddenSize}`,
        );
      }
      for (let i = 0; i + 1 < chunk.length; i++) {
        const position = start + i;
        if (!recorded(position)) continue;
        const next = chunk[i + 1]!;
        const edgeTop = proposals[i]!;
        const { topIds, topLogprobs, candidateLogprob } = cloud[i]!;
        const context = ids.slice(Math.max(0, position + 1 - REPETITION_WINDOW), position + 1);
        rows.push({
          hidden: edge.hidden.slice(i * hiddenSize, (i + 1) * hiddenSize),
          previousHidden: i > 0 ? edge.hidden.slice((i - 1) * hiddenSize, i * hiddenSize) : new Float32Array(hiddenSize),
          // The position is the index within the window the model saw.
          extra: writeExtraFeatures(
            new Float32Array(ALL_EXTRA_WIDTH),
            ALL_EXTRA_GROUPS,
            logitStats(edge.logits.subarray(i * edgeRow, i * edgeRow + shared)),
            context,
            i,
          ),
          edgeCorrect: edgeTop === next ? 1 : 0,
          cloudCorrect: topIds[0] === next ? 1 : 0,
          cloudProbOfEdgeTop1: Math.exp(candidateLogprob),
          cloudTopProb: Math.exp(topLogprobs[0]!),
          proposed: edgeTop,
          cloudTop: topIds[0]!,
          repeatsFourGram: repeatsFourGramAt(ids, position, edgeTop) ? 1 : 0,
          cloudRepeatsFourGram: repeatsFourGramAt(ids, position, topIds[0]!) ? 1 : 0,
          nextId: next,
        });
      }
    }
    return { rows, windowed: ids.length > window };
  }

  /** Appends a reading's rows as records of `paragraph`. */
  add(reading: SequenceReading, paragraph: number): void {
    if (reading.windowed) this.windowed++;
    for (const row of reading.rows) {
      this.hiddenRows.push(row.hidden);
      this.previousHiddenRows.push(row.previousHidden);
      this.extraRows.push(row.extra);
      this.edgeCorrect.push(row.edgeCorrect);
      this.cloudCorrect.push(row.cloudCorrect);
      this.cloudProbOfEdgeTop1.push(row.cloudProbOfEdgeTop1);
      this.cloudTopProb.push(row.cloudTopProb);
      this.proposed.push(row.proposed);
      this.cloudTop.push(row.cloudTop);
      this.repeatsFourGram.push(row.repeatsFourGram);
      this.cloudRepeatsFourGram.push(row.cloudRepeatsFourGram);
      this.nextId.push(row.nextId);
      this.paragraph.push(paragraph);
    }
  }

  build(): TeacherForced {
    const hiddenSize = this.edgeModel.pack.hiddenSize;
    const count = this.count;
    const hidden = new Float32Array(count * hiddenSize);
    this.hiddenRows.forEach((row, r) => hidden.set(row, r * hiddenSize));
    const previousHidden = new Float32Array(count * hiddenSize);
    this.previousHiddenRows.forEach((row, r) => previousHidden.set(row, r * hiddenSize));
    const extra = new Float32Array(count * ALL_EXTRA_WIDTH);
    this.extraRows.forEach((row, r) => extra.set(row, r * ALL_EXTRA_WIDTH));
    return {
      hiddenSize,
      count,
      hidden,
      previousHidden,
      extra,
      edgeCorrect: Uint8Array.from(this.edgeCorrect),
      cloudCorrect: Uint8Array.from(this.cloudCorrect),
      cloudProbOfEdgeTop1: Float32Array.from(this.cloudProbOfEdgeTop1),
      cloudTopProb: Float32Array.from(this.cloudTopProb),
      proposed: Int32Array.from(this.proposed),
      cloudTop: Int32Array.from(this.cloudTop),
      repeatsFourGram: Uint8Array.from(this.repeatsFourGram),
      cloudRepeatsFourGram: Uint8Array.from(this.cloudRepeatsFourGram),
      nextId: Int32Array.from(this.nextId),
      paragraph: Int32Array.from(this.paragraph),
      windowed: this.windowed,
    };
  }
}
