/**
 * What `bench decode` runs on: a pack folder, or a preset's random-weight pack built once under
 * models/bench/ (in the layout asked for), and the prompt: real token ids of an English text.
 *
 * @example
 * const { dir } = await resolvePack({ preset: 'qwen2.5-0.5b', layout: 'fused', log: console.error });
 * const ids = await promptIds(loadModelPack(dir), 100);
 */
import type { ModelPack } from '../../shared/model/model-pack.ts';
import { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { UsageError } from '../cli-support.ts';
import { ensureBenchPack, type BenchLayout } from '../models/random-pack.ts';

const PROMPT_TEXT =
  'The little robot walked along the quiet beach at sunrise, counting shells and listening to the waves. ' +
  'Every morning it wrote down what it found: a blue stone, a piece of glass worn smooth by the sea, a feather. ';

export interface BenchTarget {
  preset?: string;
  pack?: string;
  /** The preset's graph layout; `plain` when omitted. A pack has its own. */
  layout?: BenchLayout;
  log: (line: string) => void;
}

export async function resolvePack(o: BenchTarget): Promise<{ target: string; dir: string }> {
  if (o.pack) {
    if (o.preset) throw new UsageError('--preset and --pack are alternatives');
    if (o.layout) throw new UsageError('--layout builds a --preset; a --pack has its own layout');
    return { target: 'pack', dir: o.pack };
  }
  const preset = o.preset ?? 'qwen2.5-0.5b';
  return { target: `preset:${preset}`, dir: await ensureBenchPack(preset, o.log, o.layout) };
}

/** `count` real token ids of an English text (repeated as needed). */
export async function promptIds(pack: ModelPack, count: number): Promise<number[]> {
  const tokenizer = await TextTokenizer.fromPack(pack.dir);
  const ids: number[] = [];
  while (ids.length < count) ids.push(...tokenizer.encode(PROMPT_TEXT, { addBos: false, parseSpecialTokens: false }));
  return ids.slice(0, count);
}
