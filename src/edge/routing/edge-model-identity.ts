/**
 * Which edge model a router pack was trained on, as router.json's `edge_model` records it, and the check
 * that the edge model it is loaded with is that one. A router's scores are a function of one model's hidden
 * states and logits: over another model's they mean nothing, even at the same hidden size (the demo router
 * on another stories model repeats `Once Once Once`).
 *
 * The identity is what makes the hidden states and ids what they are: the tokenizer's fingerprint
 * (src/shared/text/tokenizer-fingerprint.ts), the hidden size, and a digest of config.json's architecture fields
 * (layers, sizes, heads, positions, rope). The weights are not hashed: a quantized or re-exported variant of
 * the same model (another .onnx of the same pack) serves the same router, and hashing a large model at every
 * start would cost seconds. Two fine-tunes of one architecture and tokenizer are thus not told apart;
 * pack-source.json's `slmSha256` names the exact weights a router was trained on.
 *
 * A router.json older than the field names its edge model only by `slm` (a path relative to the router pack):
 * when that folder is there, its identity is compared; when it is not, its folder name must be the edge
 * model's. Either way a router whose model cannot be shown to be the edge model is refused.
 *
 * @example
 * checkRouterTrainedFor('models/router-stories260k-distilled-1l', loadModelPack('models/stories260k'));
 * // throws: router ... was trained for edge model stories260k-distilled-1l (hidden size 64, 1 layer, vocabulary 512 ids), not ...
 */
import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { createHash } from 'node:crypto';
import { AppError } from '../../shared/errors.ts';
import { isRecord } from '../../shared/is-record.ts';
import { readJsonFile, type ModelPack } from '../../shared/model/model-pack.ts';
import { tokenizerFingerprint } from '../../shared/text/tokenizer-fingerprint.ts';

/** router.json's `edge_model`. */
export interface EdgeModelIdentity {
  /** The pack's folder name, for messages only: a copied or renamed pack is the same model. */
  name: string;
  hidden_size: number;
  /** For messages: the architecture digest covers it. */
  num_hidden_layers: number;
  /** SHA-256 (hex) of config.json's ARCHITECTURE_FIELDS, keys sorted. */
  architecture_sha256: string;
  /** The edge model's tokenizer fingerprint (sha256) and its vocabulary size (for messages). */
  tokenizer_sha256: string;
  vocabulary_size: number;
}

/** The config.json fields that decide a decoder's hidden states; absent ones are left out. */
const ARCHITECTURE_FIELDS = [
  'model_type',
  'vocab_size',
  'hidden_size',
  'intermediate_size',
  'num_hidden_layers',
  'num_attention_heads',
  'num_key_value_heads',
  'head_dim',
  'hidden_act',
  'max_position_embeddings',
  'rope_theta',
  'rope_scaling',
  'rms_norm_eps',
  'tie_word_embeddings',
] as const;

/** The identity of the model pack in `packDir` (its config.json, tokenizer.json and tokenizer_config.json). */
export function edgeModelIdentity(packDir: string): EdgeModelIdentity {
  const read = readJsonFile(join(packDir, 'config.json'));
  const config = isRecord(read) ? read : {};
  const fields = Object.fromEntries(ARCHITECTURE_FIELDS.filter((k) => config[k] !== undefined).map((k) => [k, config[k]]));
  const tokenizer = tokenizerFingerprint(packDir);
  const int = (v: unknown) => (Number.isInteger(v) ? (v as number) : 0);
  return {
    name: basename(resolve(packDir)),
    hidden_size: int(config.hidden_size),
    num_hidden_layers: int(config.num_hidden_layers),
    architecture_sha256: createHash('sha256').update(JSON.stringify(fields)).digest('hex'),
    tokenizer_sha256: tokenizer.sha256,
    vocabulary_size: tokenizer.vocabularySize,
  };
}

/** What tells two identities apart, in words naming the files; empty when they are the same model. */
function differences(a: EdgeModelIdentity, b: EdgeModelIdentity): string[] {
  const found: string[] = [];
  if (a.hidden_size !== b.hidden_size) found.push('hidden size');
  if (a.architecture_sha256 !== b.architecture_sha256) found.push('architecture (config.json)');
  if (a.tokenizer_sha256 !== b.tokenizer_sha256) found.push('tokenizer (tokenizer.json, tokenizer_config.json)');
  return found;
}

function shown(identity: EdgeModelIdentity): string {
  const layers = `${identity.num_hidden_layers} layer${identity.num_hidden_layers === 1 ? '' : 's'}`;
  return `hidden size ${identity.hidden_size}, ${layers}, vocabulary ${identity.vocabulary_size.toLocaleString('en-US')} ids`;
}

/** What to do instead: the built-in scorer, or a router trained for this model. */
function wayOut(pack: ModelPack): string {
  return `start with --router builtin (the edge model's own top-1 probability, which fits any edge model), or train a router for this one: bun run router train --edge-model ${pack.dir} (--cloud-model PACK | --cloud HOST:PORT) --text FILE --out DIR`;
}

/** "router R was trained for edge model A (…), not B (…): their X, Y differ. …" */
function trainedForAnother(
  routerDir: string,
  trainedFor: string,
  recorded: EdgeModelIdentity,
  pack: ModelPack,
  actual: EdgeModelIdentity,
  differs: string[],
): AppError {
  return new AppError(
    'INVALID_ARGUMENT',
    `router ${routerDir} was trained for edge model ${trainedFor} (${shown(recorded)}), not ${pack.dir} (${shown(actual)}): their ${differs.join(', ')} ${differs.length === 1 ? 'differs' : 'differ'}, so its scores mean nothing for this model. To run it, ${wayOut(pack)}`,
  );
}

/**
 * Throws INVALID_ARGUMENT, naming both models, when the router pack in `routerDir` was trained for another
 * edge model than `pack` (see the header for a router.json without `edge_model`).
 */
export function checkRouterTrainedFor(routerDir: string, pack: ModelPack): void {
  const meta = readJsonFile(join(routerDir, 'router.json'));
  if (!isRecord(meta)) return;
  const recorded = isRecord(meta.edge_model) ? (meta.edge_model as unknown as EdgeModelIdentity) : undefined;
  const actual = edgeModelIdentity(pack.dir);
  if (recorded) {
    const differs = differences(recorded, actual);
    if (differs.length > 0) throw trainedForAnother(routerDir, recorded.name, recorded, pack, actual, differs);
    return;
  }
  const named = typeof meta.slm === 'string' ? meta.slm : undefined;
  if (named === undefined)
    throw new AppError(
      'INVALID_ARGUMENT',
      `router ${routerDir}: router.json names no edge model (no edge_model, no slm), so nothing shows it was trained for ${pack.dir}. To run it, ${wayOut(pack)}`,
    );
  const namedDir = resolve(routerDir, named);
  if (existsSync(join(namedDir, 'config.json')) && existsSync(join(namedDir, 'tokenizer.json'))) {
    const trainedOn = edgeModelIdentity(namedDir);
    const differs = differences(trainedOn, actual);
    if (differs.length > 0) throw trainedForAnother(routerDir, namedDir, trainedOn, pack, actual, differs);
    return;
  }
  if (basename(namedDir) === basename(pack.dir)) return;
  throw new AppError(
    'INVALID_ARGUMENT',
    `router ${routerDir} was trained for edge model ${basename(namedDir)} (router.json's slm, a router.json older than its edge_model fingerprint), not ${basename(pack.dir)} (${pack.dir}). To run it, ${wayOut(pack)}`,
  );
}
