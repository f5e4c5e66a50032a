/**
 * Seeded cases for the privacy tests: a held-out story excerpt with synthetic entities put in (names no
 * story model writes on its own, emails, phone numbers, card numbers), the spans that mark them in code
 * points, and generation settings drawn across what the loop does (joint and llm_only, route spans,
 * speculation, sampling). The same seed gives the same case.
 *
 * @example
 * const c = privateCase(7, stories); // { prompt, spans: [[18, 34, 'name']], values: ['Zenobia Kraszewski'], settings }
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { seededRandom } from '../../src/shared/seeded-random.ts';
import { ASSETS_DIR } from '../../src/shared/paths.ts';

const NAMES = ['Zenobia Kraszewski', 'Quillon Vasquez', 'Oyelaran', 'Thibault Marchetti', 'Xiomara', 'Kwabena Osei'];
/**
 * Names as a tokenizer may not give them back: decomposed (NFD, which an NFC tokenizer composes), compatibility
 * characters (NFKC: the Angstrom sign, full-width letters, a ligature), and spaces that clean-up rules remove.
 */
const FORM_NAMES = [
  'Jose\u0301 Nu\u0301n\u0303ez',
  '\u212Bse \u00D8dega\u030Ard',
  'Zoe\u0308 Bronte\u0308',
  '\uFF2B\uFF49\uFF4D \uFF2C\uFF45\uFF45',
  '\uFB01nnegan Dubois',
  'Ann , Lee',
  'Dr . Vex',
  "Kim 's Cafe",
  'Pat ! Jones',
];
const EMAILS = ['zenobia.k@example.org', 'q.vasquez@mail.example.com', 'oyelaran77@example.net'];
const PHONES = ['+44 20 7946 0958', '(415) 555-2671', '+1 415 555 0175', '+33 1 42 68 53 00'];
const CARDS = ['4111 1111 1111 1111', '5500-0000-0000-0004'];
/** Multi-byte text next to values: a span must count code points, and tokens may split a character. */
const DECORATIONS = ['', '', '🙂 ', 'é ', '日本 '];

export interface PrivateCase {
  prompt: string;
  /** The marked spans: every entity's, or the names' alone when `detect` finds the rest. */
  spans: [number, number, string][];
  /** Detector kinds the request asks for (empty: everything is marked). */
  detect: string[];
  /** Every inserted entity. */
  values: string[];
  settings: {
    mode: 'joint' | 'llm_only';
    threshold: number;
    routeSpan: number;
    speculate: boolean;
    temperature: number;
    seed: number;
    maxNewTokens: number;
  };
}

export function heldOutStories(): string[] {
  const text = readFileSync(join(ASSETS_DIR, 'datasets/tinystories/tinystories_excerpt_197k.txt'), 'utf8');
  // The last part of the excerpt: text the routers were not trained on.
  return text
    .slice(-60_000)
    .split(/\n\s*\n/)
    .map((s) => s.trim())
    .filter((s) => s.length > 120);
}

/** `forms`: names drawn from FORM_NAMES, the spellings a tokenizer may change. */
export function privateCase(seed: number, stories: readonly string[], options: { forms?: boolean } = {}): PrivateCase {
  const random = seededRandom(seed * 7919 + 17);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const story = pick(stories);
  const cut = story.indexOf(' ', 60 + Math.floor(random() * Math.min(200, story.length - 80)));
  const head = story.slice(0, cut > 0 ? cut : 120);
  const name = pick(options.forms ? FORM_NAMES : NAMES);
  const pieces: { text: string; kind?: string }[] = [{ text: pick(DECORATIONS) }, { text: name, kind: 'name' }, { text: ` had a friend. ${head} ` }];
  if (random() < 0.6)
    pieces.push({ text: 'Write to ' }, { text: pick(EMAILS), kind: 'email' }, { text: ' or call ' }, { text: pick(PHONES), kind: 'phone' }, { text: '. ' });
  if (random() < 0.3) pieces.push({ text: 'The card was ' }, { text: pick(CARDS), kind: 'card' }, { text: '. ' });
  // Ending on the name's first word invites the edge to copy it: generated text repeating a value is private too.
  pieces.push({ text: random() < 0.5 ? `Then ${name.split(' ')[0]}` : `${name} said` });
  // Emails, phone and card numbers are found by the detector in some cases rather than marked.
  const detect = random() < 0.4 ? ['email', 'phone', 'card'] : [];
  let prompt = '';
  const spans: [number, number, string][] = [];
  for (const { text, kind } of pieces) {
    const start = Array.from(prompt).length;
    prompt += text;
    if (kind && (kind === 'name' || detect.length === 0)) spans.push([start, start + Array.from(text).length, kind]);
  }
  return {
    prompt,
    spans,
    detect,
    values: [...new Set(pieces.filter((p) => p.kind).map((p) => p.text))],
    settings: {
      mode: random() < 0.85 ? 'joint' : 'llm_only',
      threshold: 0.5 + random() * 0.49,
      routeSpan: 1 + Math.floor(random() * 3),
      speculate: random() < 0.6,
      temperature: random() < 0.6 ? 0 : 0.8,
      seed: Math.floor(random() * 1e6),
      maxNewTokens: 6 + Math.floor(random() * 14),
    },
  };
}
