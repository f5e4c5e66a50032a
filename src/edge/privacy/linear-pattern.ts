/**
 * Regular expressions on a linear-time engine (re2js, a pure-JS port of RE2): matching costs at most the
 * text's length times the pattern's program size, whatever the pattern, so no pattern can backtrack
 * catastrophically. Patterns RE2 cannot run (backreferences, lookaround) do not compile at all.
 *
 * @example
 * const pattern = LinearPattern.compile('EMP-\\d{6}');
 * [...pattern.spans('badge EMP-123456')]; // [{ start: 6, end: 16 }]
 */
import { RE2JS } from 're2js';
import { errorMessage } from '../../shared/errors.ts';

export interface TextSpan {
  start: number;
  end: number;
}

/**
 * Largest program (RE2's own measure of a pattern's cost) accepted. Matching time grows with it times the
 * text's length, so the cap bounds what one operator pattern can cost a long prompt: `\w{200}x` is a
 * 203-step program, ordinary patterns such as `\bEMP-\d{6}\b` are under 20 (docs/privacy-detection.md).
 */
export const MAX_PROGRAM_SIZE = 200;

export class LinearPattern {
  private constructor(private readonly re: RE2JS) {}

  /**
   * Compiles a pattern in JavaScript syntax (RE2JS.translateRegExp turns `\u00e9` and `(?<name>` into RE2's
   * spelling). Throws an Error saying why a pattern is refused: RE2's own parse error, a program larger than
   * `maxProgramSize`, or a pattern that matches the empty string (it would find an entity everywhere).
   */
  static compile(source: string, options: { caseInsensitive?: boolean; maxProgramSize?: number } = {}): LinearPattern {
    let re: RE2JS;
    try {
      re = RE2JS.compile(RE2JS.translateRegExp(source), options.caseInsensitive ? RE2JS.CASE_INSENSITIVE : 0);
    } catch (e) {
      throw new Error(`does not compile under the linear-time engine (RE2; no backreferences or lookaround): ${errorMessage(e)}`);
    }
    const maxProgramSize = options.maxProgramSize ?? MAX_PROGRAM_SIZE;
    if (re.programSize() > maxProgramSize)
      throw new Error(`compiles to a program of ${re.programSize()} steps, more than ${maxProgramSize}; matching time grows with it`);
    if (re.matches('')) throw new Error('matches the empty string');
    return new LinearPattern(re);
  }

  /** The leftmost-first matches, each after the last, in UTF-16 code units; `from` skips the text before it. */
  *spans(text: string, from = 0): Generator<TextSpan> {
    const matcher = this.re.matcher(text);
    let at = from;
    while (at <= text.length && matcher.find(at)) {
      const start = matcher.start();
      const end = matcher.end();
      // An empty match (a pattern such as `x*` is refused; a built-in one could still end empty) moves on.
      if (end > start) yield { start, end };
      at = end > start ? end : end + 1;
    }
  }
}
