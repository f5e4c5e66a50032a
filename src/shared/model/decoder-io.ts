/**
 * What a decoder export's inputs and outputs are, read from the inference session's metadata instead
 * of assumed: the ids' and mask's integer type, whether `position_ids` exists, the KV cache's float
 * type, and the float types of `logits` and `hidden_states`. Anything the edge cannot feed is refused
 * when the model loads, naming the input, rather than failing on the first generation.
 *
 * The same reading serves a running session (its `inputMetadata`/`outputMetadata`) and `models inspect`
 * (the graph's declarations), so what inspect reports is what the edge will do.
 *
 * @example
 * const io = readDecoderIo({ where: path, numLayers: 5, inputs: session.inputMetadata, outputs: session.outputMetadata });
 * io.cache; // 'float16' for a model_fp16.onnx
 */
import { AppError } from '../errors.ts';
import type { FloatType, IndexType } from './float-tensors.ts';

export interface DecoderIo {
  ids: IndexType;
  /** Absent when the export takes no attention mask. */
  mask?: IndexType;
  /** Absent when the export computes positions itself. */
  positions?: IndexType;
  /**
   * The export takes `num_logits_to_keep` (int64 scalar, Hugging Face's `logits_to_keep`): logits come
   * back for the last that many positions only, 0 = all. The edge feeds 2 (the last logits, and the hidden
   * state before them where hidden_states is the sliced head input) unless every position is asked for.
   */
  logitsToKeep: boolean;
  /** Element type of every `past_key_values.*` input and `present.*` output. */
  cache: FloatType;
  logits: FloatType;
  /** Absent when the export has no `hidden_states` output (it cannot drive a router then). */
  hidden?: FloatType;
  /** The cache input names, `past_key_values.{layer}.{key|value}`, in layer order. */
  pastNames: string[];
  /**
   * The last axis of every cache tensor, as the export declares it; absent when it is symbolic (then the
   * config's head_dim). A fused graph pads small heads (see decoder-graph-fused.ts), so its cache can be wider.
   */
  cacheHeadDim?: number;
  /**
   * `plain`: the cache grows, `present.*` comes back one position longer than `past_key_values.*`.
   * `fused`: the graph takes `seqlens_k` and `total_sequence_length` (onnxruntime's GroupQueryAttention):
   * one preallocated buffer per cache tensor is fed as both past and present and written in place.
   */
  layout: 'plain' | 'fused';
  /**
   * Fused layout only: the graph also outputs `new_key_values.{i}.*`, just the positions a run added
   * (decoder-graph-fused.ts). The edge fetches those and writes them into its buffer itself, instead of
   * fetching the whole buffer back as `present.*` (onnxruntime-node copies every fetched output).
   */
  newKeyValues: boolean;
}

/** Inputs some exporters add that the edge does not feed, with what feeding them would take. */
const UNSUPPORTED_INPUTS: Record<string, string> = {
  use_cache_branch: 'a bool choosing the merged decoder\'s branch; export the "with past" decoder alone instead',
  cache_position: 'an int64 index per new token; re-export without it (positions come from position_ids)',
};

/** One declared input or output: onnxruntime's ValueMetadata has this shape (`type` only for tensors). */
export interface DeclaredValue {
  name: string;
  /** `float32`, `float16`, `int64`, ...; absent for non-tensor values. */
  type?: string;
  /** Fixed axes as numbers, symbolic ones as names; absent when not known. */
  shape?: readonly (number | string)[];
}

export interface DecoderDeclarations {
  /** The model file, for messages. */
  where: string;
  /** `num_hidden_layers`: how many `past_key_values.{i}` pairs to expect. */
  numLayers: number;
  inputs: readonly DeclaredValue[];
  outputs: readonly DeclaredValue[];
}

type Declared = Map<string, { type: string; shape?: readonly (number | string)[] }>;

function declared(list: readonly DeclaredValue[]): Declared {
  return new Map(list.map((m) => [m.name, { type: m.type ?? 'non-tensor', ...(m.shape ? { shape: m.shape } : {}) }]));
}

export function readDecoderIo(d: DecoderDeclarations): DecoderIo {
  const { where, numLayers } = d;
  const inputs = declared(d.inputs);
  const outputs = declared(d.outputs);
  const refuse = (what: string): never => {
    throw new AppError('INVALID_ARGUMENT', `${where}: ${what}`);
  };
  const missing = [...['input_ids'].filter((n) => !inputs.has(n)), ...['logits'].filter((n) => !outputs.has(n))];
  if (missing.length) refuse(`not a decoder export (missing ${missing.join(', ')})`);

  const indexType = (name: string): IndexType => {
    const type = inputs.get(name)!.type;
    return type === 'int32' || type === 'int64' ? type : refuse(`input ${name} is ${type}; the edge feeds int32 or int64`);
  };
  const floatType = (map: Declared, name: string, kind: string): FloatType => {
    const type = map.get(name)!.type;
    return type === 'float32' || type === 'float16' ? type : refuse(`${kind} ${name} is ${type}; the edge reads float32 or float16`);
  };

  const pastNames: string[] = [];
  for (let i = 0; i < numLayers; i++) for (const kind of ['key', 'value']) pastNames.push(`past_key_values.${i}.${kind}`);
  const fusedInputs = ['seqlens_k', 'total_sequence_length'];
  const fused = fusedInputs.some((n) => inputs.has(n));
  // The cache comes back whole (present.*) or, from a fused graph, as its new positions alone (new_key_values.*).
  const returned = (n: string) => [n.replace('past_key_values', 'present'), ...(fused ? [newKeyValuesName(n)] : [])].find((o) => outputs.has(o));
  const absent = pastNames.filter((n) => !inputs.has(n) || !returned(n));
  if (absent.length) {
    refuse(
      `expected a KV cache of ${numLayers} layers (config.json num_hidden_layers); missing ${absent.slice(0, 4).join(', ')}${absent.length > 4 ? ', ...' : ''} or their present.* outputs`,
    );
  }
  const cacheTypes = new Set([...pastNames.map((n) => floatType(inputs, n, 'input')), ...pastNames.map((n) => floatType(outputs, returned(n)!, 'output'))]);
  if (cacheTypes.size > 1) refuse('the KV cache mixes float32 and float16 tensors; the edge keeps one type between steps');

  if (fused) {
    for (const name of fusedInputs) {
      const type = inputs.get(name)?.type;
      if (type !== 'int32') refuse(`input ${name} is ${type ?? 'missing'}; GroupQueryAttention's layout takes seqlens_k and total_sequence_length, both int32`);
    }
    if (cacheTypes.has('float16')) refuse('the shared KV buffer of the fused layout is float32 only on the edge');
  }
  if (inputs.has('num_logits_to_keep') && inputs.get('num_logits_to_keep')!.type !== 'int64') {
    refuse(`input num_logits_to_keep is ${inputs.get('num_logits_to_keep')!.type}; the edge feeds it as an int64 scalar`);
  }
  const known = new Set(['input_ids', 'attention_mask', 'position_ids', 'num_logits_to_keep', ...(fused ? fusedInputs : []), ...pastNames]);
  for (const name of inputs.keys()) {
    if (known.has(name)) continue;
    const need = UNSUPPORTED_INPUTS[name] ?? 'an input the edge does not know how to fill';
    refuse(`input ${name} is not fed by the edge (${need})`);
  }
  const lastAxis = inputs.get(pastNames[0]!)?.shape?.[3];
  return {
    ...(typeof lastAxis === 'number' && lastAxis > 0 ? { cacheHeadDim: lastAxis } : {}),
    ids: indexType('input_ids'),
    ...(inputs.has('attention_mask') ? { mask: indexType('attention_mask') } : {}),
    ...(inputs.has('position_ids') ? { positions: indexType('position_ids') } : {}),
    logitsToKeep: inputs.has('num_logits_to_keep'),
    cache: [...cacheTypes][0] ?? 'float32',
    logits: floatType(outputs, 'logits', 'output'),
    ...(outputs.has('hidden_states') ? { hidden: floatType(outputs, 'hidden_states', 'output') } : {}),
    pastNames,
    layout: fused ? 'fused' : 'plain',
    newKeyValues: fused && pastNames.every((n) => outputs.has(newKeyValuesName(n))),
  };
}

/** The output holding the positions a run added to the cache tensor `pastName` (`past_key_values.3.key` → `new_key_values.3.key`). */
export function newKeyValuesName(pastName: string): string {
  return pastName.replace('past_key_values', 'new_key_values');
}

/** One line per fact, as `models inspect` prints it under "on the edge". */
export function formatDecoderIo(io: DecoderIo): string {
  return [
    `ids ${io.ids}`,
    `attention_mask ${io.mask ?? 'none'}`,
    `position_ids ${io.positions ?? 'none (the model computes positions)'}`,
    `num_logits_to_keep ${io.logitsToKeep ? 'int64 (fed 2: logits of the last two positions only; 0 when every position is asked for)' : 'none (logits for every fed position)'}`,
    `KV cache ${io.cache} (${io.pastNames.length / 2} layers, kept in ${io.cache} between steps)${io.layout === 'fused' ? `; one buffer per tensor (seqlens_k, total_sequence_length), ${io.newKeyValues ? 'the new positions fetched alone (new_key_values.*) and written into it' : 'shared by past and present'}` : ''}`,
    `logits ${io.logits}${io.logits === 'float16' ? ' (converted to float32 once per step)' : ''}`,
    `hidden_states ${io.hidden ?? 'none (run models expose-hidden to add it)'}${io.hidden === 'float16' ? ' (converted to float32 once per step)' : ''}`,
  ].join('\n');
}
