/**
 * IPv4 and IPv6 addresses: ip-regex's pattern on the linear-time engine, then the address's surroundings
 * (a version number such as 1.2.3.4.5, or a word around it, is no address) and node's own parser. Four small
 * numbers are also how versions and sections are numbered: after a word that names one (`version 1.2.0.4`,
 * `firmware 2.1.0.3`, `section 4.3.2.1`) or with a pre-release or build suffix (`1.2.3.4-beta`, `1.0.0.1+build`)
 * they are one.
 *
 * @example
 * findIps('resolver 8.8.8.8, port 10.0.0.1:53'); // [{ start: 9, end: 16 }, { start: 23, end: 31 }]
 */
import ipRegex from 'ip-regex';
import { isIP } from 'node:net';
import { LinearPattern, type TextSpan } from '../linear-pattern.ts';

// ip-regex's IPv6 alternatives make a program of about 1,200 steps: fixed, and measured in the doc.
const IP = LinearPattern.compile(ipRegex().source, { maxProgramSize: Infinity });

/** A word that names what follows as a version or a section, just before the number. */
const NUMBERING_WORD =
  /(?:^|[^\p{L}])(?:version|ver|v|release|rel|build|revision|rev|firmware|fw|update|patch|sdk|api|driver|section|sec|chapter|ch|clause|paragraph|para|§)\.? ?$/iu;

export function findIps(text: string): TextSpan[] {
  return [...IP.spans(text)].filter(({ start, end }) => {
    const family = isIP(text.slice(start, end));
    return family !== 0 && standsAlone(text, start, end) && !(family === 4 && numbersSomethingElse(text, start, end));
  });
}

function numbersSomethingElse(text: string, start: number, end: number): boolean {
  return NUMBERING_WORD.test(text.slice(Math.max(0, start - 12), start)) || /^(?:-[A-Za-z]|\+[\w.])/.test(text.slice(end, end + 2));
}

/** Not part of a longer dotted or coloned token: 1.2.3.4.5, v1.2.3.4, 12:30:45:00. An IPv4 port (:8080) may follow. */
function standsAlone(text: string, start: number, end: number): boolean {
  if (/[\w.:]/.test(text[start - 1] ?? '')) return false;
  const after = text.slice(end, end + 2);
  if (/^:\d/.test(after)) return !text.slice(start, end).includes(':');
  return !/^\w|^[.:][\w:]/.test(after);
}
