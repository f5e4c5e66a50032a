/**
 * Teacher forcing of an edge/cloud pair over paragraphs of text: each paragraph (BOS + its tokens) is
 * run once through each model in one forward pass, and every position that has a next token becomes a
 * record: the edge model's hidden state there, and whether each model's top-1 is the true next token.
 * Router training and the routing evaluation both start from this.
 *
 * @example
 * const forced = await teacherForcePacks('models/stories260k-3l', 'models/stories260k', paragraphs);
 * const keep = citerLabels(forced); // 1 = keep the edge token, 0 = route
 */
import { join } from 'node:path';
import { encodePrompt } from '../../edge/decoder-loop.ts';
import { DecoderModel } from '../../shared/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import { argmax } from '../../shared/logits.ts';
import { loadModelPack, readJsonFile, type ModelPack } from '../../shared/model-pack.ts';
import { TextTokenizer } from '../../shared/tokenizer.ts';

export interface TeacherForced {
  hiddenSize: number;
  /** Number of positions (records). */
  count: number;
  /** Edge hidden states, `[count, hiddenSize]` row-major. */
  hidden: Float32Array;
  /** 1 where the model's top-1 equals the true next token. */
  slmCorrect: Uint8Array;
  llmCorrect: Uint8Array;
  /** Index (into the given paragraphs) of the paragraph each record comes from. */
  paragraph: Int32Array;
}

export interface TeacherForceOptions {
  slm: DecoderModel;
  llm: DecoderModel;
  /** The edge tokenizer; the cloud model must share its vocabulary (checked by the caller). */
  tokenizer: TextTokenizer;
  paragraphs: readonly string[];
  /** Called after each paragraph. */
  onParagraph?: (done: number, total: number) => void;
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

export async function teacherForce(options: TeacherForceOptions): Promise<TeacherForced> {
  const { slm, llm, tokenizer, paragraphs } = options;
  if (!slm.hasHiddenStates) {
    throw new AppError('FAILED_PRECONDITION', `${slm.pack.dir}: the edge model has no hidden_states output (add it with: bun run models expose-hidden)`);
  }
  const hiddenSize = slm.pack.hiddenSize;
  // Each model's logits rows are as wide as its embedding; exports pad it differently (Qwen2.5-0.5B 151,936
  // rows, the 7B and 32B 152,064) over the same tokenizer, so top-1 is taken over the ids both have.
  const edgeRow = slm.pack.vocabSize;
  const cloudRow = llm.pack.vocabSize;
  const shared = Math.min(edgeRow, cloudRow);
  const maxLength = Math.min(slm.pack.maxPositions, llm.pack.maxPositions);
  const hiddenRows: Float32Array[] = [];
  const slmCorrect: number[] = [];
  const llmCorrect: number[] = [];
  const paragraphOf: number[] = [];

  for (const [p, text] of paragraphs.entries()) {
    // Positions past the shorter context window cannot be scored by both models.
    // Encoded as generation encodes a prompt (BOS first where pack and tokenizer both have one).
    const ids = encodePrompt({ slm, tokenizer }, text).slice(0, maxLength);
    if (ids.length >= 2) {
      const edge = await forward(slm, ids);
      const cloud = await forward(llm, ids);
      if (edge.hidden.length !== ids.length * hiddenSize) {
        throw new AppError(
          'FAILED_PRECONDITION',
          `${slm.pack.dir}: hidden_states has ${edge.hidden.length / ids.length} values per position, config.json says hidden_size ${hiddenSize}`,
        );
      }
      const positions = ids.length - 1;
      hiddenRows.push(edge.hidden.slice(0, positions * hiddenSize));
      for (let i = 0; i < positions; i++) {
        const next = ids[i + 1];
        slmCorrect.push(argmax(edge.logits.subarray(i * edgeRow, i * edgeRow + shared)) === next ? 1 : 0);
        llmCorrect.push(argmax(cloud.logits.subarray(i * cloudRow, i * cloudRow + shared)) === next ? 1 : 0);
        paragraphOf.push(p);
      }
    }
    options.onParagraph?.(p + 1, paragraphs.length);
  }

  const hidden = new Float32Array(slmCorrect.length * hiddenSize);
  let offset = 0;
  for (const rows of hiddenRows) {
    hidden.set(rows, offset);
    offset += rows.length;
  }
  return {
    hiddenSize,
    count: slmCorrect.length,
    hidden,
    slmCorrect: Uint8Array.from(slmCorrect),
    llmCorrect: Uint8Array.from(llmCorrect),
    paragraph: Int32Array.from(paragraphOf),
  };
}

/** The records whose paragraph satisfies `keep`, in their original order. */
export function selectParagraphs(forced: TeacherForced, keep: (paragraph: number) => boolean): TeacherForced {
  const rows: number[] = [];
  for (let i = 0; i < forced.count; i++) if (keep(forced.paragraph[i]!)) rows.push(i);
  const h = forced.hiddenSize;
  const hidden = new Float32Array(rows.length * h);
  rows.forEach((r, i) => hidden.set(forced.hidden.subarray(r * h, (r + 1) * h), i * h));
  return {
    hiddenSize: h,
    count: rows.length,
    hidden,
    slmCorrect: Uint8Array.from(rows, (r) => forced.slmCorrect[r]!),
    llmCorrect: Uint8Array.from(rows, (r) => forced.llmCorrect[r]!),
    paragraph: Int32Array.from(rows, (r) => forced.paragraph[r]!),
  };
}

/** The token → id map of a pack's tokenizer.json (plus its added tokens), as comparable text. */
function vocabularyOf(pack: ModelPack): string {
  const tokenizer = readJsonFile(join(pack.dir, 'tokenizer.json')) as {
    model?: { vocab?: unknown };
    added_tokens?: { id: number; content: string }[];
  };
  const added = (tokenizer.added_tokens ?? []).map((t) => [t.id, t.content]);
  return JSON.stringify([tokenizer.model?.vocab ?? null, added]);
}

/**
 * Routing needs the two models to mean the same thing by every token id: the same tokenizer. Their
 * embeddings may still differ in padding rows beyond it (`vocab_size` in config.json), which name no token.
 */
export function checkSameVocabulary(slm: ModelPack, llm: ModelPack): void {
  if (vocabularyOf(slm) !== vocabularyOf(llm)) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `${slm.dir} and ${llm.dir} have different tokenizers (${slm.vocabSize} vs ${llm.vocabSize} embedding rows): routing needs a pair that shares its tokenizer`,
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
  const slmPack = typeof slmSource === 'string' ? loadModelPack(slmSource) : slmSource;
  const llmPack = typeof llmSource === 'string' ? loadModelPack(llmSource) : llmSource;
  checkSameVocabulary(slmPack, llmPack);
  const tokenizer = await TextTokenizer.fromPack(slmPack.dir);
  const slm = await DecoderModel.load(slmPack);
  try {
    const llm = await DecoderModel.load(llmPack);
    try {
      return await teacherForce({ slm, llm, tokenizer, paragraphs, onParagraph });
    } finally {
      await llm.release();
    }
  } finally {
    await slm.release();
  }
}
