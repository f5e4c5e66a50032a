/**
 * Reads a Hugging Face hub export of a Llama or Qwen2 decoder (the plain graph transformers' exporter and
 * optimum write) back into the builder's `DecoderSpec` and `DecoderWeights`, so `models optimize` can
 * rebuild it in the fused layout. The pattern is recognised from the graph itself, by the scopes the
 * exporter names its nodes after the modules (`/model/layers.{i}/self_attn/q_proj/MatMul`, with any
 * wrapper prefix such as `/m/`), and checked against `config.json`:
 * - each projection is one MatMul on a stored weight of the shape the config implies, `[in, out]`; an
 *   Add of a constant `[out]` after q/k/v is the attention bias (all three in every layer, or none);
 * - each RMSNorm scope holds one `[hidden]` weight; the embedding is a Gather on `[vocab, hidden]`; the
 *   LM head is a MatMul on `[hidden, vocab]`, tied when it holds exactly the transposed embedding;
 * - the rotary embedding is the half-split one (cos/sin of `cat(freqs, freqs)`, i.e. `rotate_half`),
 *   with the inverse frequencies `rope_theta` and `head_dim` give.
 * Anything else is refused naming what was expected and what was found.
 *
 * @example
 * const { spec, weights, weightType } = readHubExport('hf-exports/stories260k-hf/model.onnx');
 * buildDecoderGraph(spec, weights, { head: 'gemm', hiddenStatesOutput: true, layout: 'fused' });
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { NodeProto } from 'onnx-buf';
import { AppError } from '../../shared/errors.ts';
import { readJsonFile } from '../../shared/model/model-pack.ts';
import type { DecoderSpec, DecoderWeights, LayerWeights } from './decoder-spec.ts';
import { specFromHubConfig } from './hub-export-config.ts';
import { ExportConstants, QUANTIZED_ADVICE, type WeightType } from './hub-export-tensors.ts';
import { readModel } from './onnx-file.ts';

export interface HubExport {
  spec: DecoderSpec;
  weights: DecoderWeights;
  /** How the export stores its weights; float16 ones were widened to float32. */
  weightType: WeightType;
  /** The config.json read (merged into the output pack's). */
  config: Record<string, unknown>;
  configPath: string;
}

const QUANTIZED_OPS = new Set([
  'MatMulNBits',
  'MatMulInteger',
  'DynamicQuantizeLinear',
  'QuantizeLinear',
  'DequantizeLinear',
  'QLinearMatMul',
  'GatherBlockQuantized',
  'DynamicQuantizeMatMul',
  'MatMulIntegerToFloat',
]);
const FUSED_OPS = new Set(['GroupQueryAttention', 'MultiHeadAttention', 'SkipSimplifiedLayerNormalization', 'SimplifiedLayerNormalization', 'RotaryEmbedding']);
const LAYER_SCOPE = /\/model\/layers\.(\d+)\//;
/** Relative tolerance on the rotary frequencies: float16 exports store them rounded to 11 bits. */
const FREQUENCY_TOLERANCE = 1e-3;

/** `config.json` beside the model file, or one folder up (a hub repository keeps its ONNX files in `onnx/`). */
export function hubConfigPath(modelPath: string): string {
  const here = join(dirname(modelPath), 'config.json');
  const parent = join(dirname(dirname(modelPath)), 'config.json');
  if (existsSync(here) || !existsSync(parent)) return here;
  return parent;
}

export function readHubExport(modelPath: string): HubExport {
  const configPath = hubConfigPath(modelPath);
  const config = readJsonFile(configPath) as Record<string, unknown>;
  const generationPath = join(dirname(configPath), 'generation_config.json');
  const generation = existsSync(generationPath) ? (readJsonFile(generationPath) as Record<string, unknown>) : {};
  const spec = specFromHubConfig(config, generation, configPath);
  const reader = new ExportReader(modelPath, spec);
  return { ...reader.read(), config, configPath };
}

class ExportReader {
  private readonly nodes: NodeProto[];
  private readonly constants: ExportConstants;
  private readonly consumers = new Map<string, NodeProto[]>();
  private readonly types = new Set<WeightType>();

  constructor(
    private readonly modelPath: string,
    private readonly spec: DecoderSpec,
  ) {
    const graph = readModel(modelPath).graph!;
    this.nodes = graph.node;
    this.constants = new ExportConstants(graph, modelPath);
    for (const node of this.nodes) {
      for (const input of node.input) {
        const list = this.consumers.get(input);
        if (list) list.push(node);
        else this.consumers.set(input, [node]);
      }
    }
  }

  read(): { spec: DecoderSpec; weights: DecoderWeights; weightType: WeightType } {
    this.refuseForeignOps();
    this.checkLayers();
    this.checkRotary();
    const { hiddenSize: d, vocabSize: vocab } = this.spec;
    const layers = Array.from({ length: this.spec.numLayers }, (_, i) => this.layer(i));
    const qkvBias = this.qkvBias(layers);
    const embedGather = this.single('model/embed_tokens', 'Gather', 'the token embedding');
    const embed = this.weight(embedGather, 0, [vocab, d], 'model/embed_tokens');
    const headMatMul = this.single('lm_head', 'MatMul', 'the LM head');
    const head = this.weight(headMatMul, 1, [d, vocab], 'lm_head');
    const tied = isTransposeOf(head, embed, vocab, d);
    const weights: DecoderWeights = { embed, layers, finalNorm: this.norm('model/norm'), ...(tied ? {} : { lmHead: head }) };
    const spec = { ...this.spec, qkvBias, tieEmbeddings: tied };
    return { spec, weights, weightType: this.types.has('float16') ? 'float16' : 'float32' };
  }

  /** True when every layer has q, k and v biases, false when none has any; anything between is refused. */
  private qkvBias(layers: LayerWeights[]): boolean {
    const found = layers.map(
      (l) =>
        (['q', 'k', 'v'] as const)
          .filter((x) => l[`b${x}`])
          .map((x) => `${x}_proj`)
          .join(', ') || 'none',
    );
    if (found.every((f) => f === 'none')) return false;
    if (found.every((f) => f === 'q_proj, k_proj, v_proj')) return true;
    return this.refuse(`q/k/v biases must be on all three projections of every layer, or on none; found ${found.map((f, i) => `layer ${i}: ${f}`).join('; ')}`);
  }

  private refuse(what: string): never {
    throw new AppError('INVALID_ARGUMENT', `${this.modelPath}: ${what}`);
  }

  private refuseForeignOps(): void {
    const quantized = this.nodes.find((n) => QUANTIZED_OPS.has(n.opType));
    if (quantized) this.refuse(`a quantized export (${opName(quantized)} at ${quantized.name || quantized.output[0]}); ${QUANTIZED_ADVICE}`);
    const fused = this.nodes.find((n) => FUSED_OPS.has(n.opType));
    if (fused) this.refuse(`already in onnxruntime's fused layout (${opName(fused)} at ${fused.name || fused.output[0]}); nothing to rewrite`);
  }

  private checkLayers(): void {
    const found = new Set<number>();
    for (const node of this.nodes) {
      const m = LAYER_SCOPE.exec(node.name);
      if (m) found.add(Number(m[1]));
    }
    if (found.size === 0)
      this.refuse(
        "no decoder layers found: expected nodes named like /model/layers.0/self_attn/q_proj/MatMul (a Hugging Face Llama/Qwen2 export made by transformers' exporter or optimum)",
      );
    const expected = this.spec.numLayers;
    const missing = Array.from({ length: expected }, (_, i) => i).filter((i) => !found.has(i));
    const extra = [...found].filter((i) => i >= expected).sort((a, b) => a - b);
    const have = `the graph has layers ${[...found].sort((a, b) => a - b).join(', ')}`;
    if (missing.length)
      this.refuse(
        `config.json has num_hidden_layers ${expected}, but ${missing.length > 1 ? `layers ${missing.join(', ')} are` : `layer ${missing[0]} is`} missing (${have})`,
      );
    if (extra.length) this.refuse(`config.json has num_hidden_layers ${expected}, but ${have}`);
  }

  /** The half-split rotary layout with the config's frequencies; the builder recomputes the tables from these. */
  private checkRotary(): void {
    const scope = this.inScope('rotary_emb');
    if (scope.length === 0) this.refuse('no rotary embedding found (expected nodes under /model/rotary_emb/ or /model/layers.{i}/self_attn/rotary_emb/)');
    const half = this.spec.headDim / 2;
    const expected = Array.from({ length: half }, (_, j) => this.spec.ropeTheta ** (-(2 * j) / this.spec.headDim));
    const candidate = scope.flatMap((n) => n.input).find((x) => this.constants.isFloat(x) && this.constants.dims(x)!.reduce((a, b) => a * b, 1) === half);
    const frequencies = candidate === undefined ? undefined : this.constants.floats(candidate);
    if (!frequencies) this.refuse(`no rotary inverse frequencies found under rotary_emb (expected ${half} values for head_dim ${this.spec.headDim})`);
    const off = expected.findIndex((f, j) => Math.abs(frequencies.values[j]! - f) > FREQUENCY_TOLERANCE * f);
    if (off >= 0) {
      this.refuse(
        `the rotary frequencies [${[...frequencies.values].map((f) => f.toPrecision(4)).join(', ')}] are not rope_theta ${this.spec.ropeTheta}'s for head_dim ${this.spec.headDim} ([${expected.map((f) => f.toPrecision(4)).join(', ')}])`,
      );
    }
    const halfSplit = scope.some((n) => n.opType === 'Concat' && n.input.length === 2 && n.input[0] === n.input[1]);
    if (!halfSplit) this.refuse('rotary layout not recognised: expected the half-split one (rotate_half: cos/sin of Concat(freqs, freqs) under rotary_emb)');
  }

  private layer(i: number): LayerWeights {
    const { hiddenSize: d, numHeads: h, numKvHeads: kv, headDim: hd, intermediateSize: f } = this.spec;
    const p = `model/layers.${i}`;
    const q = this.projection(`${p}/self_attn/q_proj`, d, h * hd, true);
    const k = this.projection(`${p}/self_attn/k_proj`, d, kv * hd, true);
    const v = this.projection(`${p}/self_attn/v_proj`, d, kv * hd, true);
    return {
      attnNorm: this.norm(`${p}/input_layernorm`),
      wq: q.w,
      wk: k.w,
      wv: v.w,
      wo: this.projection(`${p}/self_attn/o_proj`, h * hd, d, false).w,
      ...(q.b ? { bq: q.b } : {}),
      ...(k.b ? { bk: k.b } : {}),
      ...(v.b ? { bv: v.b } : {}),
      ffnNorm: this.norm(`${p}/post_attention_layernorm`),
      wGate: this.projection(`${p}/mlp/gate_proj`, d, f, false).w,
      wUp: this.projection(`${p}/mlp/up_proj`, d, f, false).w,
      wDown: this.projection(`${p}/mlp/down_proj`, f, d, false).w,
    };
  }

  /** A linear layer: its MatMul's `[rows, cols]` weight, and the Add of a constant `[cols]` after it when `biasAllowed`. */
  private projection(scope: string, rows: number, cols: number, biasAllowed: boolean): { w: Float32Array; b?: Float32Array } {
    const matmul = this.single(scope, 'MatMul', `the ${scope.split('/').pop()} projection`);
    const w = this.weight(matmul, 1, [rows, cols], scope);
    const add = (this.consumers.get(matmul.output[0]!) ?? []).find(
      (n) => n.opType === 'Add' && n.input.some((x) => this.constants.dims(x)?.join() === String(cols)),
    );
    if (!add) return { w };
    if (!biasAllowed) this.refuse(`${scope} has a bias (${add.name}), which the decoder graph does not have`);
    const b = this.constants.floats(add.input.find((x) => this.constants.dims(x)?.join() === String(cols))!)!;
    this.types.add(b.type);
    return { w, b: b.values };
  }

  /** The one `[hidden]` weight an RMSNorm scope multiplies by. */
  private norm(scope: string): Float32Array {
    const d = this.spec.hiddenSize;
    const weights = [
      ...new Set(
        this.inScope(scope)
          .filter((n) => n.opType === 'Mul')
          .flatMap((n) => n.input),
      ),
    ].filter((x) => this.constants.dims(x)?.join() === String(d));
    if (weights.length !== 1) this.refuse(`expected one RMSNorm weight [${d}] under /${scope}/, found ${weights.length}`);
    const w = this.constants.floats(weights[0]!)!;
    this.types.add(w.type);
    return w.values;
  }

  private inScope(scope: string): NodeProto[] {
    const marker = `/${scope}/`;
    return this.nodes.filter((n) => n.name.includes(marker));
  }

  private single(scope: string, opType: string, what: string): NodeProto {
    const found = this.inScope(scope).filter((n) => n.opType === opType);
    if (found.length !== 1) this.refuse(`expected one ${opType} for ${what} under /${scope}/, found ${found.length}`);
    return found[0]!;
  }

  /** Input `at` of `node` as a stored float weight of exactly `dims`. */
  private weight(node: NodeProto, at: number, dims: number[], scope: string): Float32Array {
    const name = node.input[at] ?? '';
    const found = this.constants.dims(name);
    if (!found) this.refuse(`${node.name}: its weight ${name} is computed, not stored`);
    if (found.join() !== dims.join()) {
      this.refuse(
        `${node.name}: weight ${name} is [${found.join(', ')}], expected [${dims.join(', ')}] for /${scope}/ from config.json (${this.shapeSummary()})`,
      );
    }
    const w = this.constants.floats(name)!;
    this.types.add(w.type);
    return w.values;
  }

  private shapeSummary(): string {
    const s = this.spec;
    return `hidden_size ${s.hiddenSize}, num_attention_heads ${s.numHeads}, num_key_value_heads ${s.numKvHeads}, head_dim ${s.headDim}, intermediate_size ${s.intermediateSize}, vocab_size ${s.vocabSize}`;
  }
}

function opName(node: NodeProto): string {
  return node.domain ? `${node.domain} ${node.opType}` : node.opType;
}

/** Whether the `[hidden, vocab]` head holds exactly the transposed `[vocab, hidden]` embedding (a tied head). */
function isTransposeOf(head: Float32Array, embed: Float32Array, vocab: number, d: number): boolean {
  for (let v = 0; v < vocab; v++) for (let i = 0; i < d; i++) if (head[i * vocab + v] !== embed[v * d + i]) return false;
  return true;
}
