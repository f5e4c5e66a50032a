/**
 * What a story request asks the reply to mention, read from the request itself: the subject of
 * `… a story about a cat.` / `Tell me another one about Tim?` (its last word: the noun or the name), or
 * the words of `… with the words ball, happy and park.` / `… that has the words … in it.`. A request that
 * names nothing (`Tell me a short story.`) asks for nothing. A reply mentions a word where it holds it
 * as a whole word, in any case, also with a plural -s or -es (the chat pair's own measurement, its
 * README).
 *
 * @example
 * requestedWords('Write a story with the words ball, happy and park.'); // ['ball', 'happy', 'park']
 * mentions('The dogs ran home.', 'dog'); // true
 */

/** `words ball, happy and park` (up to `in it`, the sentence's end); `about (the|a|an) X` (up to `, please`, the end). */
const WORD_LIST = /\bwords?\s+(.+?)(?:\s+in it)?\s*[.?!]*$/i;
const ABOUT = /\babout\s+(.+?)(?:,\s*please)?\s*[.?!]*$/i;

export function requestedWords(request: string): string[] {
  const list = WORD_LIST.exec(request);
  if (list) {
    return list[1]!
      .split(/\s*,\s*|\s+and\s+/)
      .map((w) => w.trim())
      .filter((w) => w !== '');
  }
  const about = ABOUT.exec(request);
  if (!about) return [];
  // `about the old tree` asks for the tree: the last word is the noun (or the name).
  const subject = about[1]!.split(/\s+/).at(-1)!;
  return subject === '' ? [] : [subject];
}

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function mentions(reply: string, word: string): boolean {
  return new RegExp(`(?<![\\p{L}\\p{N}])${escaped(word)}(?:e?s)?(?![\\p{L}\\p{N}])`, 'iu').test(reply);
}
