/**
 * Finds private entities in prompt text (email addresses, phone numbers, payment cards, IBANs, IP addresses,
 * and the operator's own kinds given as patterns) so they can be pseudonymised before anything leaves the box.
 * Built-in kinds are found by validating libraries (docs/privacy-detection.md); operator patterns run on a
 * linear-time engine, so no pattern can hang the box. Offsets are UTF-16 code units, `end` exclusive.
 *
 * @example
 * const { kinds, patterns } = parsePrivateDetection('email,employee_id', ['employee_id=EMP-\\d{6}']);
 * const detector = PrivateDetector.create(kinds, patterns);
 * detector.detect('EMP-123456 is alice@example.com');
 * // [{ start: 0, end: 10, kind: 'employee_id' }, { start: 14, end: 31, kind: 'email' }]
 */
import { AppError, errorMessage } from '../../shared/errors.ts';
import { BUILT_IN_KINDS, findBuiltIn, type BuiltInKind } from './detectors/built-in.ts';
import { foldForDetection, type DetectionText } from './detectors/detection-text.ts';
import { LinearPattern, type TextSpan } from './linear-pattern.ts';
import { KIND_NAME, MARKED_KIND } from './private-spans.ts';

export { BUILT_IN_KINDS };

export interface DetectedSpan {
  start: number;
  end: number;
  kind: string;
}

export interface OperatorPattern {
  kind: string;
  pattern: string;
}

/** The longest text detect() reads: the HTTP body limit (256 KiB); bounds the time of every pattern. */
export const MAX_DETECT_CHARS = 262_144;

// The words of --private-detect itself (a kind so named could not be asked for alone), and the kind of the
// spans a request marks without naming one (its placeholders would be shared).
const RESERVED_KINDS = ['all', 'none', MARKED_KIND];

const invalid = (message: string) => new AppError('INVALID_ARGUMENT', message);
const isBuiltIn = (kind: string): kind is BuiltInKind => (BUILT_IN_KINDS as readonly string[]).includes(kind);

/**
 * Parses the edge flags: `--private-detect email,phone` (a comma list of kinds, or `all`/`none`) and each
 * `--private-pattern KIND=REGEX` (a kind may have several). An operator's pattern is on whatever the list
 * says (writing one is asking for it); the list chooses among the built-in kinds. Throws INVALID_ARGUMENT
 * naming the flag.
 *
 * @example
 * parsePrivateDetection('all', ['ticket=TCK-\\d+']); // { kinds: ['email', ..., 'ip', 'ticket'], patterns: [...] }
 */
export function parsePrivateDetection(kindsFlag: string | undefined, patternFlags: readonly string[]): { kinds: string[]; patterns: OperatorPattern[] } {
  const patterns = patternFlags.map((flag) => {
    const equals = flag.indexOf('=');
    if (equals < 0) throw invalid(`--private-pattern must be KIND=REGEX, got ${JSON.stringify(flag)}`);
    const pattern = { kind: flag.slice(0, equals), pattern: flag.slice(equals + 1) };
    compileOperatorPattern(pattern);
    return pattern;
  });
  const known = knownKindsOf(patterns);
  const operatorKinds = patterns.map((pattern) => pattern.kind);
  const words = (kindsFlag ?? 'none').split(',').map((word) => word.trim());
  if (words.length === 1 && words[0] === 'none') return { kinds: known.filter((kind) => operatorKinds.includes(kind)), patterns };
  if (words.length === 1 && words[0] === 'all') return { kinds: known, patterns };
  for (const word of words) {
    if (word === 'all' || word === 'none') throw invalid(`--private-detect: ${word} stands alone, got ${JSON.stringify(kindsFlag)}`);
    if (!known.includes(word)) throw invalid(`--private-detect: unknown kind ${JSON.stringify(word)}; known: ${known.join(', ')} (or all, none)`);
  }
  return { kinds: known.filter((kind) => words.includes(kind) || operatorKinds.includes(kind)), patterns };
}

export class PrivateDetector {
  private constructor(
    readonly kinds: readonly string[],
    readonly knownKinds: readonly string[],
    private readonly operatorPatterns: ReadonlyMap<string, readonly LinearPattern[]>,
  ) {}

  /** Throws INVALID_ARGUMENT on an unknown kind, a bad kind name, or a pattern the linear engine refuses. */
  static create(kinds: readonly string[], patterns: readonly OperatorPattern[]): PrivateDetector {
    const compiled = new Map<string, LinearPattern[]>();
    for (const pattern of patterns) compiled.set(pattern.kind, [...(compiled.get(pattern.kind) ?? []), compileOperatorPattern(pattern)]);
    const known = knownKindsOf(patterns);
    for (const kind of kinds) if (!known.includes(kind)) throw invalid(`--private-detect: unknown kind ${JSON.stringify(kind)}; known: ${known.join(', ')}`);
    return new PrivateDetector(Object.freeze(known.filter((kind) => kinds.includes(kind))), Object.freeze(known), compiled);
  }

  /**
   * The entities of the box's kinds and `extraKinds` (a request's) in `text`, sorted by start and not
   * overlapping: of two that overlap the longer stays, then the earlier, then the kind listed first in
   * knownKinds. Throws INVALID_ARGUMENT on an unknown kind or a text longer than MAX_DETECT_CHARS.
   */
  detect(text: string, extraKinds: readonly string[] = []): DetectedSpan[] {
    for (const kind of extraKinds)
      if (!this.knownKinds.includes(kind)) throw invalid(`unknown private kind ${JSON.stringify(kind)}; known: ${this.knownKinds.join(', ')}`);
    // Fail closed: a text left partly unread could let an entity through.
    if (text.length > MAX_DETECT_CHARS) throw invalid(`text to check for private entities is ${text.length} characters; the limit is ${MAX_DETECT_CHARS}`);
    const found: DetectedSpan[] = [];
    // Folded once, and only when some kind is looked for: a box that detects nothing costs its prompts nothing.
    let folded: DetectionText | undefined;
    for (const kind of this.knownKinds) {
      if (!this.kinds.includes(kind) && !extraKinds.includes(kind)) continue;
      folded ??= foldForDetection(text);
      for (const span of this.spansOf(kind, folded)) found.push({ start: span.start, end: span.end, kind });
    }
    return withoutOverlaps(found, this.knownKinds);
  }

  /**
   * Built-in kinds read the text folded to ASCII (digits of any script, full-width forms: detection-text.ts). An
   * operator's pattern reads the text as typed and, where folding changed it, the folded text too, so that
   * `EMP-\d{6}` also finds `EMP-１２３４５６` and a pattern written for the typed characters still matches them.
   */
  private spansOf(kind: string, folded: DetectionText): TextSpan[] {
    if (isBuiltIn(kind)) return findBuiltIn(kind, folded);
    const patterns = this.operatorPatterns.get(kind) ?? [];
    const asTyped = patterns.flatMap((pattern) => [...pattern.spans(folded.typed)]);
    if (folded.text === folded.typed) return asTyped;
    return [...asTyped, ...patterns.flatMap((pattern) => [...pattern.spans(folded.text)].map((span) => folded.originalSpan(span)))];
  }
}

/** Built-in kinds first, then the operator's in the order first given. */
function knownKindsOf(patterns: readonly OperatorPattern[]): string[] {
  return [...new Set([...BUILT_IN_KINDS, ...patterns.map((pattern) => pattern.kind)])];
}

function compileOperatorPattern({ kind, pattern }: OperatorPattern): LinearPattern {
  const flag = `--private-pattern ${kind}=${pattern}`;
  if (!KIND_NAME.test(kind)) throw invalid(`${flag}: the kind must be lowercase [a-z][a-z0-9_]{0,15}, got ${JSON.stringify(kind)}`);
  if (isBuiltIn(kind)) throw invalid(`${flag}: ${kind} is a built-in kind; give the pattern's kind another name`);
  if (RESERVED_KINDS.includes(kind))
    throw invalid(`${flag}: ${kind} is reserved (a word of --private-detect, or the kind of unnamed marked spans); give the pattern's kind another name`);
  try {
    return LinearPattern.compile(pattern);
  } catch (e) {
    throw invalid(`${flag}: ${errorMessage(e)}`);
  }
}

/**
 * Keeps spans in order of preference (longer, earlier, kind listed first) where no preferred one already
 * covers any of their code units. The spans of one pattern on one text (or one phone region) are disjoint, so
 * checking and marking cost at most the text's length for each.
 */
function withoutOverlaps(spans: readonly DetectedSpan[], kindOrder: readonly string[]): DetectedSpan[] {
  const preferred = [...spans].sort(
    (a, b) => b.end - b.start - (a.end - a.start) || a.start - b.start || kindOrder.indexOf(a.kind) - kindOrder.indexOf(b.kind),
  );
  const taken = new Uint8Array(spans.reduce((end, span) => Math.max(end, span.end), 0));
  const kept: DetectedSpan[] = [];
  for (const span of preferred) {
    if (taken.subarray(span.start, span.end).includes(1)) continue;
    taken.fill(1, span.start, span.end);
    kept.push(span);
  }
  return kept.sort((a, b) => a.start - b.start);
}
