/**
 * Reads a llama2.c checkpoint (version-0 header: seven int32 `dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size, seq_len`, then float32 weights in llama2.c's order; a negative vocab_size
 * means the classifier is stored separately) and turns it into a `DecoderSpec` + `DecoderWeights`.
 */
import { readFileSync } from 'node:fs';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { transpose } from './decoder-graph.ts';
import type { DecoderSpec, DecoderWeights, LayerWeights } from './decoder-spec.ts';

export interface Llama2cHeader {
  dim: number;
  hiddenDim: number;
  nLayers: number;
  nHeads: number;
  nKvHeads: number;
  vocabSize: number;
  seqLen: number;
  sharedClassifier: boolean;
}

const HEADER_BYTES = 7 * 4;

/** The llama2.c layout: float counts of every weight block, in file order. */
function blockSizes(h: Llama2cHeader) {
  const headSize = h.dim / h.nHeads;
  const kvDim = h.nKvHeads * headSize;
  const L = h.nLayers;
  return {
    embed: h.vocabSize * h.dim,
    rmsAtt: L * h.dim,
    wq: L * h.dim * h.dim,
    wk: L * h.dim * kvDim,
    wv: L * h.dim * kvDim,
    wo: L * h.dim * h.dim,
    rmsFfn: L * h.dim,
    w1: L * h.hiddenDim * h.dim,
    w2: L * h.dim * h.hiddenDim,
    w3: L * h.hiddenDim * h.dim,
    rmsFinal: h.dim,
    freqCis: h.seqLen * headSize, // real and imaginary halves, unused: RoPE is recomputed
    classifier: h.sharedClassifier ? 0 : h.vocabSize * h.dim,
  };
}

export function parseLlama2cHeader(bytes: Uint8Array, file: string): Llama2cHeader {
  if (bytes.byteLength < HEADER_BYTES) {
    throw new AppError('INVALID_ARGUMENT', `${file}: too short for a llama2.c header (${bytes.byteLength} bytes)`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, HEADER_BYTES);
  const [dim, hiddenDim, nLayers, nHeads, nKvHeads, vocab, seqLen] = Array.from({ length: 7 }, (_, i) => view.getInt32(i * 4, true)) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const header: Llama2cHeader = {
    dim,
    hiddenDim,
    nLayers,
    nHeads,
    nKvHeads,
    vocabSize: Math.abs(vocab),
    seqLen,
    sharedClassifier: vocab > 0,
  };
  const fields = { dim, hiddenDim, nLayers, nHeads, nKvHeads, vocabSize: header.vocabSize, seqLen };
  for (const [k, v] of Object.entries(fields)) {
    if (!(v > 0 && v < 1 << 24)) throw new AppError('INVALID_ARGUMENT', `${file}: header field ${k}=${v} is not plausible`);
  }
  if (dim % nHeads !== 0 || nHeads % nKvHeads !== 0 || (dim / nHeads) % 2 !== 0) {
    throw new AppError('INVALID_ARGUMENT', `${file}: header heads do not divide (dim=${dim}, n_heads=${nHeads}, n_kv_heads=${nKvHeads})`);
  }
  const expected = HEADER_BYTES + 4 * Object.values(blockSizes(header)).reduce((a, b) => a + b, 0);
  if (bytes.byteLength !== expected) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `${file}: size ${bytes.byteLength} bytes does not match its header (expected ${expected}: ${JSON.stringify(fields)})`,
    );
  }
  return header;
}

/**
 * llama2.c rotates interleaved pairs (2j, 2j+1) inside each head; Hugging Face-style graphs rotate
 * (j, j + headDim/2). Permuting the output rows of wq and wk per head maps one onto the other; q·k
 * is unchanged because both sides are permuted alike.
 */
function ropePermutation(nHeads: number, headSize: number): Int32Array {
  const perm = new Int32Array(nHeads * headSize);
  for (let hIdx = 0; hIdx < nHeads; hIdx++) {
    for (let j = 0; j < headSize / 2; j++) {
      perm[hIdx * headSize + j] = hIdx * headSize + 2 * j;
      perm[hIdx * headSize + headSize / 2 + j] = hIdx * headSize + 2 * j + 1;
    }
  }
  return perm;
}

/** `w` is `[out, in]` (PyTorch); returns `[in, out]` with output column c taken from row perm[c]. */
function toInOut(w: Float32Array, out: number, inDim: number, perm?: Int32Array): Float32Array {
  if (!perm) return transpose(w, out, inDim);
  const result = new Float32Array(w.length);
  for (let c = 0; c < out; c++) {
    const row = perm[c]!;
    for (let r = 0; r < inDim; r++) result[r * out + c] = w[row * inDim + r]!;
  }
  return result;
}

export interface ConvertedCheckpoint {
  header: Llama2cHeader;
  spec: DecoderSpec;
  weights: DecoderWeights;
}

/** Reads the checkpoint and keeps its first `layers` layers (all when omitted). */
export function readLlama2cCheckpoint(file: string, layers?: number): ConvertedCheckpoint {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(file);
  } catch (e) {
    throw new AppError('NOT_FOUND', `${file}: cannot read checkpoint (${errorMessage(e)})`);
  }
  const header = parseLlama2cHeader(bytes, file);
  const keep = layers ?? header.nLayers;
  if (!Number.isInteger(keep) || keep < 1 || keep > header.nLayers) {
    throw new AppError('INVALID_ARGUMENT', `--layers must be an integer in [1, ${header.nLayers}] for ${file}, got ${layers}`);
  }
  // Copy into an aligned buffer: the file's bytes may not start on a 4-byte boundary. (Buffer#slice
  // would share the whole pool buffer, so slice the ArrayBuffer itself.)
  const floats = new Float32Array(bytes.buffer.slice(bytes.byteOffset + HEADER_BYTES, bytes.byteOffset + bytes.byteLength));
  const sizes = blockSizes(header);
  let offset = 0;
  const take = (n: number) => floats.subarray(offset, (offset += n));
  const blocks = Object.fromEntries(Object.entries(sizes).map(([k, n]) => [k, take(n)])) as Record<keyof typeof sizes, Float32Array>;

  const { dim, hiddenDim, nHeads, nKvHeads } = header;
  const headSize = dim / nHeads;
  const kvDim = nKvHeads * headSize;
  const qPerm = ropePermutation(nHeads, headSize);
  const kPerm = ropePermutation(nKvHeads, headSize);
  const slice = (block: Float32Array, l: number, n: number) => block.subarray(l * n, (l + 1) * n);
  const layerWeights: LayerWeights[] = Array.from({ length: keep }, (_, l) => ({
    attnNorm: slice(blocks.rmsAtt, l, dim).slice(),
    wq: toInOut(slice(blocks.wq, l, dim * dim), dim, dim, qPerm),
    wk: toInOut(slice(blocks.wk, l, kvDim * dim), kvDim, dim, kPerm),
    wv: toInOut(slice(blocks.wv, l, kvDim * dim), kvDim, dim),
    wo: toInOut(slice(blocks.wo, l, dim * dim), dim, dim),
    ffnNorm: slice(blocks.rmsFfn, l, dim).slice(),
    wGate: toInOut(slice(blocks.w1, l, hiddenDim * dim), hiddenDim, dim),
    wDown: toInOut(slice(blocks.w2, l, dim * hiddenDim), dim, hiddenDim),
    wUp: toInOut(slice(blocks.w3, l, hiddenDim * dim), hiddenDim, dim),
  }));
  const spec: DecoderSpec = {
    modelType: 'llama',
    vocabSize: header.vocabSize,
    hiddenSize: dim,
    intermediateSize: hiddenDim,
    numLayers: keep,
    numHeads: nHeads,
    numKvHeads: nKvHeads,
    headDim: headSize,
    ropeTheta: 10000,
    rmsNormEps: 1e-5,
    maxPositions: header.seqLen,
    qkvBias: false,
    tieEmbeddings: header.sharedClassifier,
    bosTokenId: 1,
    // llama2.c models are trained on documents that each start with BOS and end with nothing, so the
    // model ends a story by predicting BOS; run.c stops there too. </s> is kept for completeness.
    eosTokenIds: [2, 1],
  };
  const weights: DecoderWeights = {
    embed: blocks.embed.slice(),
    layers: layerWeights,
    finalNorm: blocks.rmsFinal.slice(),
    lmHead: header.sharedClassifier ? undefined : transpose(blocks.classifier, header.vocabSize, dim),
  };
  return { header, spec, weights };
}
