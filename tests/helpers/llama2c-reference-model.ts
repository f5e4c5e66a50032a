/**
 * An independent reference forward pass over a llama2.c checkpoint, computed the way llama2.c's run.c
 * does it (float32 loops, interleaved RoPE pairs, RMSNorm eps 1e-5, shared classifier), optionally with
 * only the first k layers. It reads the checkpoint itself and shares no code with the converter.
 */
import { readFileSync } from 'node:fs';

export interface ReferenceStep {
  logits: Float32Array;
  /** The final RMSNorm output: what the ONNX packs expose as `hidden_states`. */
  hidden: Float32Array;
}

export class Llama2cReference {
  readonly dim: number;
  readonly hiddenDim: number;
  readonly nLayers: number;
  readonly nHeads: number;
  readonly nKvHeads: number;
  readonly vocabSize: number;
  readonly seqLen: number;
  private readonly w: Record<string, Float32Array>;
  private keyCache: Float32Array[];
  private valueCache: Float32Array[];
  private pos = 0;

  constructor(checkpoint: string, layers?: number) {
    const bytes = readFileSync(checkpoint);
    const header = new Int32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + 28));
    [this.dim, this.hiddenDim, this.nLayers, this.nHeads, this.nKvHeads, this.vocabSize, this.seqLen] = header as unknown as number[];
    const fileLayers = this.nLayers;
    this.nLayers = layers ?? fileLayers;
    const data = new Float32Array(bytes.buffer.slice(bytes.byteOffset + 28, bytes.byteOffset + bytes.byteLength));
    const hs = this.dim / this.nHeads;
    const kvDim = this.nKvHeads * hs;
    let o = 0;
    const take = (n: number) => data.subarray(o, (o += n));
    this.w = {
      embed: take(this.vocabSize * this.dim),
      rmsAtt: take(fileLayers * this.dim),
      wq: take(fileLayers * this.dim * this.dim),
      wk: take(fileLayers * this.dim * kvDim),
      wv: take(fileLayers * this.dim * kvDim),
      wo: take(fileLayers * this.dim * this.dim),
      rmsFfn: take(fileLayers * this.dim),
      w1: take(fileLayers * this.hiddenDim * this.dim),
      w2: take(fileLayers * this.dim * this.hiddenDim),
      w3: take(fileLayers * this.hiddenDim * this.dim),
      rmsFinal: take(this.dim),
    };
    this.keyCache = Array.from({ length: this.nLayers }, () => new Float32Array(this.seqLen * kvDim));
    this.valueCache = Array.from({ length: this.nLayers }, () => new Float32Array(this.seqLen * kvDim));
  }

  reset(): void {
    this.pos = 0;
  }

  /** One token at the next position; returns its logits and final-norm hidden state. */
  step(token: number): ReferenceStep {
    const { dim, hiddenDim, nHeads, nKvHeads, w } = this;
    const hs = dim / nHeads;
    const kvDim = nKvHeads * hs;
    const kvMul = nHeads / nKvHeads;
    const pos = this.pos++;
    const x = w.embed!.slice(token * dim, (token + 1) * dim);
    const xb = new Float32Array(dim);
    const q = new Float32Array(dim);
    const k = new Float32Array(kvDim);
    const v = new Float32Array(kvDim);
    const hb = new Float32Array(hiddenDim);
    const hb2 = new Float32Array(hiddenDim);
    const att = new Float32Array(pos + 1);

    for (let l = 0; l < this.nLayers; l++) {
      rmsnorm(xb, x, w.rmsAtt!.subarray(l * dim, (l + 1) * dim));
      matmul(q, xb, w.wq!.subarray(l * dim * dim), dim, dim);
      matmul(k, xb, w.wk!.subarray(l * dim * kvDim), dim, kvDim);
      matmul(v, xb, w.wv!.subarray(l * dim * kvDim), dim, kvDim);
      for (let i = 0; i < dim; i += 2) {
        const headDim = i % hs;
        const freq = 1 / Math.pow(10000, headDim / hs);
        const fcr = Math.cos(pos * freq);
        const fci = Math.sin(pos * freq);
        const rotations = i < kvDim ? 2 : 1;
        for (let r = 0; r < rotations; r++) {
          const vec = r === 0 ? q : k;
          const v0 = vec[i]!;
          const v1 = vec[i + 1]!;
          vec[i] = v0 * fcr - v1 * fci;
          vec[i + 1] = v0 * fci + v1 * fcr;
        }
      }
      this.keyCache[l]!.set(k, pos * kvDim);
      this.valueCache[l]!.set(v, pos * kvDim);

      xb.fill(0);
      for (let h = 0; h < nHeads; h++) {
        const kvOff = Math.floor(h / kvMul) * hs;
        for (let t = 0; t <= pos; t++) {
          let score = 0;
          for (let i = 0; i < hs; i++) score += q[h * hs + i]! * this.keyCache[l]![t * kvDim + kvOff + i]!;
          att[t] = score / Math.sqrt(hs);
        }
        softmax(att, pos + 1);
        for (let t = 0; t <= pos; t++) {
          for (let i = 0; i < hs; i++) xb[h * hs + i] += att[t]! * this.valueCache[l]![t * kvDim + kvOff + i]!;
        }
      }
      const xb2 = new Float32Array(dim);
      matmul(xb2, xb, w.wo!.subarray(l * dim * dim), dim, dim);
      for (let i = 0; i < dim; i++) x[i] += xb2[i]!;

      rmsnorm(xb, x, w.rmsFfn!.subarray(l * dim, (l + 1) * dim));
      matmul(hb, xb, w.w1!.subarray(l * dim * hiddenDim), dim, hiddenDim);
      matmul(hb2, xb, w.w3!.subarray(l * dim * hiddenDim), dim, hiddenDim);
      for (let i = 0; i < hiddenDim; i++) {
        const val = hb[i]!;
        hb[i] = (val / (1 + Math.exp(-val))) * hb2[i]!;
      }
      matmul(xb, hb, w.w2!.subarray(l * dim * hiddenDim), hiddenDim, dim);
      for (let i = 0; i < dim; i++) x[i] += xb[i]!;
    }
    const hidden = new Float32Array(dim);
    rmsnorm(hidden, x, w.rmsFinal!);
    const logits = new Float32Array(this.vocabSize);
    matmul(logits, hidden, w.embed!, dim, this.vocabSize);
    return { logits, hidden };
  }
}

function rmsnorm(out: Float32Array, x: Float32Array, weight: Float32Array): void {
  let ss = 0;
  for (let i = 0; i < x.length; i++) ss += x[i]! * x[i]!;
  ss = 1 / Math.sqrt(ss / x.length + 1e-5);
  for (let i = 0; i < x.length; i++) out[i] = weight[i]! * (ss * x[i]!);
}

/** W (d, n) @ x (n) → out (d), as llama2.c's matmul. */
function matmul(out: Float32Array, x: Float32Array, w: Float32Array, n: number, d: number): void {
  for (let i = 0; i < d; i++) {
    let val = 0;
    for (let j = 0; j < n; j++) val += w[i * n + j]! * x[j]!;
    out[i] = val;
  }
}

function softmax(x: Float32Array, size: number): void {
  let max = -Infinity;
  for (let i = 0; i < size; i++) max = Math.max(max, x[i]!);
  let sum = 0;
  for (let i = 0; i < size; i++) {
    x[i] = Math.exp(x[i]! - max);
    sum += x[i]!;
  }
  for (let i = 0; i < size; i++) x[i] = x[i]! / sum;
}
