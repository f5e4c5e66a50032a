/**
 * A request's private values, resolved once before its generation starts: the texts it marked
 * (`private_spans` of its prompt or messages) and the entities the box's detector finds in its prompt,
 * with the kinds the box detects (`--private-detect`) and those the request adds (`private_detect`).
 *
 * @example
 * privateValuesFor({ prompt, privateTexts: [{ text: 'Ann', kind: 'name' }] }, detector)?.list; // [{ text: 'Ann', kind: 'name', placeholder: '[NAME_1]' }]
 */
import { AppError } from '../../shared/errors.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import { PrivateValues, type MatchOptions, type PrivateText } from './private-values.ts';

/** What the box detects with (private-detect.ts's PrivateDetector). */
export interface TextDetector {
  /** Every kind a request may name. */
  readonly knownKinds: readonly string[];
  /** Entities of the box's kinds and `extraKinds` in `text` (UTF-16 offsets). */
  detect(text: string, extraKinds?: readonly string[]): { start: number; end: number; kind: string }[];
}

/** What of a request (request/generation-request.ts) decides its private values. */
export interface PrivacyFields {
  prompt: string;
  /** The texts it marked private. */
  privateTexts?: readonly PrivateText[];
  /** Detector kinds it adds to the box's. */
  privateDetect?: readonly string[];
}

/** The request's private values; undefined when it has none (and the generation runs exactly as without privacy). */
export function privateValuesFor(request: PrivacyFields, detector: TextDetector | undefined, match: MatchOptions = {}): PrivateValues | undefined {
  const extra = request.privateDetect ?? [];
  const unknown = extra.filter((kind) => !detector?.knownKinds.includes(kind));
  if (unknown.length > 0) {
    const known = detector?.knownKinds.join(', ') || 'none';
    throw new AppError(
      'INVALID_ARGUMENT',
      `private_detect names ${unknown.map((k) => JSON.stringify(k)).join(', ')}, which this edge does not detect (it knows: ${known})`,
    );
  }
  const detected: PrivateText[] = (detector?.detect(request.prompt, extra) ?? []).map(({ start, end, kind }) => ({
    text: request.prompt.slice(start, end),
    kind,
  }));
  const texts = [...(request.privateTexts ?? []), ...detected];
  return texts.length === 0 ? undefined : PrivateValues.of(texts, request.prompt, match);
}

/** Whether `tokenizer` gives text back in another case than written (a lowercasing normalizer): values must then be matched in any case. */
export function tokenizerFoldsCase(tokenizer: Pick<TextTokenizer, 'encode' | 'decode'>): boolean {
  const probe = 'QZ';
  return !tokenizer.decode(tokenizer.encode(probe, { addBos: false, parseSpecialTokens: false })).includes(probe);
}
