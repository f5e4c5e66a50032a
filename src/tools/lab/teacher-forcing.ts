/**
 * Teacher forcing of an edge/cloud pair over paragraphs of text: each paragraph (BOS + its tokens) is
 * run once through each model in one forward pass (in windows when longer than the context), and every
 * position that has a next token becomes a record: the edge model's hidden state and extra router
 * features there, whether each model's top-1 is the true next token, and how likely the cloud finds the
 * edge's top-1 (forced-records.ts). On-policy training records generated trajectories the same way.
 * Router training and the routing evaluation both start from this.
 *
 * @example
 * const forced = await teacherForcePacks('models/stories260k-3l', 'models/stories260k', paragraphs);
 * const keep = citerLabels(forced); // 1 = keep the edge token, 0 = route
 */
import { encodePrompt } from '../../edge/loop/decoder-loop.ts';
import type { DecoderModel } from '../../shared/model/decoder-model.ts';
import { loadLabModel } from './lab-model.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack, type ModelPack } from '../../shared/model/model-pack.ts';
import { vocabularyText } from '../../shared/text/vocabulary.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { InProcessScorer, type CloudScorer } from './cloud-scorer.ts';
import { ForcedRecords, type ForcedSequence, type SequenceReading, type TeacherForced } from './forced-records.ts';

/** Sequences read at once: enough to keep a shim busy while the edge model runs, few enough to hold in memory. */
const READS_IN_FLIGHT = 3;

export interface TeacherForceOptions {
  edgeModel: DecoderModel;
  /** The cloud model in process or behind a shim (tool-cloud.ts). */
  cloud: CloudScorer;
  /** The edge tokenizer; the cloud model must share its vocabulary (checked by the caller). */
  tokenizer: TextTokenizer;
  paragraphs: readonly string[];
  /** Called after each paragraph. */
  onParagraph?: (done: number, total: number) => void;
}

/** Both models read each paragraph; every position with a next token becomes a record (forced-records.ts). */
export async function teacherForce(options: TeacherForceOptions): Promise<TeacherForced> {
  const { edgeModel, tokenizer, paragraphs } = options;
  // Encoded as generation encodes a prompt (BOS first where pack and tokenizer both have one).
  const sequences = paragraphs.map((text) => ({ ids: encodePrompt({ edgeModel, tokenizer }, text) }));
  return teacherForceSequences({ edgeModel, cloud: options.cloud, sequences, onSequence: options.onParagraph });
}

/**
 * Both models read each sequence; its positions (all with a next token, or the ones it names: a chat's
 * assistant positions, training-documents.ts) become records whose paragraph is the sequence's index.
 */
export async function teacherForceSequences(options: {
  edgeModel: DecoderModel;
  cloud: CloudScorer;
  sequences: readonly ForcedSequence[];
  onSequence?: (done: number, total: number) => void;
}): Promise<TeacherForced> {
  const records = new ForcedRecords(options.edgeModel, options.cloud);
  const { sequences } = options;
  const read = (p: number) => records.read(sequences[p]!.ids, sequences[p]!.positions ? { positions: sequences[p]!.positions } : {});
  // A few sequences read at once, added in order: through a shim the edge reads one while the cloud scores
  // another, so the link's round trips overlap the work; in process it changes nothing but the order of runs.
  const ahead: Promise<SequenceReading>[] = [];
  for (let next = 0; next < Math.min(READS_IN_FLIGHT, sequences.length); next++) ahead.push(read(next));
  // Readings waiting behind a failed one must not be unhandled rejections: the first failure is thrown.
  for (const reading of ahead) reading.catch(() => {});
  for (let p = 0; p < sequences.length; p++) {
    records.add(await ahead.shift()!, p);
    const next = p + READS_IN_FLIGHT;
    if (next < sequences.length) {
      const reading = read(next);
      reading.catch(() => {});
      ahead.push(reading);
    }
    options.onSequence?.(p + 1, sequences.length);
  }
  return records.build();
}

/**
 * Routing needs the two models to mean the same thing by every token id: the same tokenizer. Their
 * embeddings may still differ in padding rows beyond it (`vocab_size` in config.json), which name no token.
 */
export function checkSameVocabulary(edgeModel: ModelPack, cloudModel: ModelPack): void {
  if (vocabularyText(edgeModel.dir) !== vocabularyText(cloudModel.dir)) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `${edgeModel.dir} and ${cloudModel.dir} have different tokenizers (${edgeModel.vocabSize} vs ${cloudModel.vocabSize} embedding rows): routing needs a pair that shares its tokenizer`,
    );
  }
}

/** Loads both packs, teacher-forces them over `paragraphs` once, and releases them. */
export async function teacherForcePacks(
  slmSource: string | ModelPack,
  llmSource: string | ModelPack,
  paragraphs: readonly string[],
  onParagraph?: (done: number, total: number) => void,
): Promise<TeacherForced> {
  // A folder runs its model.onnx; a loaded pack runs the variant it was loaded with (e.g. model_q4.onnx).
  const edgePack = typeof slmSource === 'string' ? loadModelPack(slmSource) : slmSource;
  const cloudPack = typeof llmSource === 'string' ? loadModelPack(llmSource) : llmSource;
  checkSameVocabulary(edgePack, cloudPack);
  const tokenizer = await TextTokenizer.fromPack(edgePack.dir);
  const edgeModel = await loadLabModel(edgePack);
  try {
    const cloudModel = await loadLabModel(cloudPack);
    try {
      return await teacherForce({ edgeModel, cloud: new InProcessScorer(cloudModel), tokenizer, paragraphs, onParagraph });
    } finally {
      await cloudModel.release();
    }
  } finally {
    await edgeModel.release();
  }
}
