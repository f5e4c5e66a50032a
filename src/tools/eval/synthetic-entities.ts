/**
 * Synthetic private entities put into held-out stories, for measuring what private spans cost
 * (private-spans-eval.ts): person names, emails and phone numbers, each a private text of its kind. The
 * first name takes the place of the story's own character (`named Lily` / `called Lily`, every mention),
 * or gets a sentence of its own when the story names nobody; every other entity is a sentence after the
 * sentence that introduces the character (or after the first sentence). Entities cycle name, email, phone,
 * then the next person's name, and so on. Seeded: the same paragraph, count and seed give the same text.
 *
 * `prompt` is the story up to the last inserted sentence, so every entity is in it: a generated
 * continuation starts there.
 *
 * @example
 * const story = insertEntities('There was a girl named Lily. Lily liked cake.', 3, 0);
 * story.text;     // "There was a girl named Anouk. Anouk's email was anouk.moreau@example.net. Anouk's phone number was 555-…. Anouk liked cake."
 * story.entities; // [{ text: 'Anouk', kind: 'name' }, { text: 'anouk.moreau@example.net', kind: 'email' }, { text: '555-…', kind: 'phone' }]
 */
import type { PrivateText } from '../../edge/privacy/private-values.ts';
import { seededRandom } from '../../shared/seeded-random.ts';

/** First names no story of the excerpt uses, none part of another (a value is found as a substring). */
export const SYNTHETIC_NAMES = [
  'Anouk',
  'Bartek',
  'Emeka',
  'Farida',
  'Gunnar',
  'Hiroko',
  'Ismay',
  'Joaquim',
  'Kwame',
  'Leocadia',
  'Lorcan',
  'Marisol',
  'Mireille',
  'Nnamdi',
  'Odile',
  'Ravindra',
  'Solveig',
  'Tavita',
  'Teodor',
  'Wanjiru',
  'Yusra',
  'Zoltan',
] as const;
const SURNAMES = ['achebe', 'brandt', 'ferreira', 'haddad', 'kowalski', 'lindqvist', 'moreau', 'nakamura', 'okafor', 'petrov', 'tanaka'] as const;
const DOMAINS = ['example.org', 'example.com', 'example.net'] as const;
export const ENTITY_KINDS = ['name', 'email', 'phone'] as const;

export interface StoryWithEntities {
  /** The story with the entities in it. */
  text: string;
  /** The story up to and including the last inserted sentence (or the one that introduces the character). */
  prompt: string;
  /** Every inserted entity, as the request marks it private. */
  entities: PrivateText[];
}

/** A sentence's end at or after `from`: after its final punctuation (and a closing quote), or the text's end. */
function sentenceEnd(text: string, from: number): number {
  const match = /[.!?]["”]?(?=\s|$)/g;
  match.lastIndex = from;
  const found = match.exec(text);
  return found ? found.index + found[0].length : text.length;
}

/** The story's own character: the first capitalised word after "named" or "called". */
function characterName(text: string): { name: string; at: number } | undefined {
  const found = /\b(?:named|called) ([A-Z][a-z]+)\b/.exec(text);
  return found ? { name: found[1]!, at: found.index } : undefined;
}

/** Picks `k` distinct items of `items` (in a seeded order), skipping those `avoid` says no to. */
function pick<T>(items: readonly T[], k: number, random: () => number, avoid: (item: T) => boolean = () => false): T[] {
  const pool = items.filter((item) => !avoid(item));
  for (let i = pool.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [pool[i], pool[j]] = [pool[j]!, pool[i]!];
  }
  return pool.slice(0, k);
}

/** `count` entities (at most one name per entry of SYNTHETIC_NAMES) in `paragraph`, drawn with `seed`. */
export function insertEntities(paragraph: string, count: number, seed: number): StoryWithEntities {
  const persons = Math.ceil(count / ENTITY_KINDS.length);
  if (!Number.isInteger(count) || count < 1 || persons > SYNTHETIC_NAMES.length) {
    throw new RangeError(`entity count must be an integer in [1, ${SYNTHETIC_NAMES.length * ENTITY_KINDS.length}], got ${count}`);
  }
  const random = seededRandom(seed);
  const names = pick(SYNTHETIC_NAMES, persons, random, (name) => paragraph.includes(name));
  const surnames = pick(SURNAMES, persons, random);
  const own = characterName(paragraph);
  let text = own ? paragraph.replace(new RegExp(`\\b${own.name}\\b`, 'g'), names[0]!) : paragraph;
  const entities: PrivateText[] = [];
  const sentences: string[] = [];
  for (let k = 0; k < count; k++) {
    const person = Math.floor(k / ENTITY_KINDS.length);
    const name = names[person]!;
    const kind = ENTITY_KINDS[k % ENTITY_KINDS.length]!;
    if (kind === 'name') {
      entities.push({ text: name, kind });
      if (person === 0 && own) continue;
      sentences.push(person === 0 ? `${name} lived next door.` : `${name} was ${names[0]}'s friend.`);
    } else if (kind === 'email') {
      const email = `${name.toLowerCase()}.${surnames[person]!}@${DOMAINS[Math.floor(random() * DOMAINS.length)]!}`;
      entities.push({ text: email, kind });
      sentences.push(`${name}'s email was ${email}.`);
    } else {
      const digits = (n: number) => Array.from({ length: n }, () => Math.floor(random() * 10)).join('');
      const phone = `555-${digits(3)}-${digits(4)}`;
      entities.push({ text: phone, kind });
      sentences.push(`${name}'s phone number was ${phone}.`);
    }
  }
  // After the sentence that introduces the character (so it is still the first mention), else the first one.
  const at = sentenceEnd(text, own ? characterName(text)!.at : 0);
  const inserted = sentences.join(' ');
  const before = text.slice(0, at).trimEnd();
  const after = text.slice(at).trimStart();
  const prompt = inserted ? `${before} ${inserted}` : before;
  text = after ? `${prompt} ${after}` : prompt;
  return { text, prompt, entities };
}
