/**
 * Email addresses: any syntactically valid address, whatever its domain, because an office's or a clinic's
 * own domains (`.internal`, `.local`, `.lan`, `.example`, a made-up one) hold exactly the addresses to hide.
 * The local part is a dot-atom of one character or more, or a quoted string (`"john doe"@example.com`); the
 * domain is two labels or more, or an IP literal (`ann@[192.168.0.1]`, `ann@[IPv6:2001:db8::1]`). The pattern
 * runs on the linear-time engine. Only the last label is judged: a name is taken, a number is not, and a file
 * extension is not, so `logo@2x.png` is no address; where the domain runs on past a real top-level domain
 * (`ann@example.com.Thanks`) the address ends at that domain. An address spelt out to fool harvesters,
 * `erin [at] example [dot] com` (brackets or parentheses), is one too.
 *
 * @example
 * findEmails('write to x@corp.internal or "john doe"@example.com.'); // [{ start: 9, end: 24 }, { start: 28, end: 50 }]
 */
import { isIP } from 'node:net';
import tlds from 'tlds';
import { LinearPattern, type TextSpan } from '../linear-pattern.ts';

// Letters, marks and digits of any script, and the signs real local parts use; RFC 5322's rarer signs
// (= / ! # ...) are left out because in prose and markup they join the words before an address to it.
const LOCAL_CHARACTER = String.raw`[\p{L}\p{M}\p{N}_%+'\-]`;
const DOT_ATOM = String.raw`[\p{L}\p{N}]${LOCAL_CHARACTER}*(?:\.${LOCAL_CHARACTER}+)*`;
const QUOTED = String.raw`"(?:[^"\\\r\n]|\\[^\r\n])+"`;
const LABEL = String.raw`[\p{L}\p{N}](?:[\p{L}\p{M}\p{N}\-]*[\p{L}\p{M}\p{N}])?`;
const IP_LITERAL = String.raw`\[(?:[Ii][Pp][Vv]6:[0-9A-Fa-f:.]+|\d{1,3}(?:\.\d{1,3}){3})\]`;
const EMAIL = LinearPattern.compile(String.raw`(?:${DOT_ATOM}|${QUOTED})@(?:${LABEL}(?:\.${LABEL})+|${IP_LITERAL})`);
const SPELT_AT = String.raw` ?[\[(][Aa][Tt][\])] ?`;
const SPELT_DOT = String.raw`(?: ?[\[(][Dd][Oo][Tt][\])] ?|\.)`;
const SPELT_OUT = LinearPattern.compile(String.raw`${DOT_ATOM}${SPELT_AT}${LABEL}(?:${SPELT_DOT}${LABEL})+`);

/** Names reserved for tests, documentation and private networks (RFC 2606, 6761, 6762; ICANN's .internal). */
const PRIVATE_USE_DOMAINS = [
  'example',
  'test',
  'invalid',
  'localhost',
  'local',
  'internal',
  'lan',
  'home',
  'corp',
  'intranet',
  'private',
  'localdomain',
  'onion',
  'alt',
];
const KNOWN_TOP_LEVEL = new Set([...tlds, ...PRIVATE_USE_DOMAINS]);
/** Endings of file names that are no top-level domain: `icon@2x.png` names an image. */
const FILE_EXTENSIONS = new Set(
  (
    'png jpg jpeg gif svg webp bmp ico tif tiff heic heif avif pdf txt csv tsv json xml yaml yml toml ini cfg conf log html htm css scss ' +
    'less js mjs cjs ts tsx jsx vue rb go kt swift cpp hpp php bat lock gz tgz tar rar exe dll dylib jar apk dmg iso img ' +
    'bin dat db sqlite wav ogg flac webm mkv avi wmv ttf otf eot psd sketch docx doc xlsx xls pptx ppt odt rtf'
  ).split(' '),
);

export function findEmails(text: string): TextSpan[] {
  const found: TextSpan[] = [];
  for (const match of EMAIL.spans(text)) {
    const end = addressEnd(text, match);
    if (end !== undefined) found.push({ start: match.start, end });
  }
  for (const match of SPELT_OUT.spans(text)) {
    const last = /[\p{L}\p{M}\p{N}-]+$/u.exec(text.slice(match.start, match.end))![0];
    if (isKnownTopLevel(last) || couldBeTopLevel(last)) found.push(match);
  }
  return found.sort((a, b) => a.start - b.start);
}

/** Where the address in a match ends, or undefined when its domain makes it none. */
function addressEnd(text: string, { end }: TextSpan): number | undefined {
  const at = text.lastIndexOf('@', end - 1);
  const domain = text.slice(at + 1, end);
  if (domain.startsWith('[')) return isIP(domain.slice(1, -1).replace(/^ipv6:/i, '')) === 0 ? undefined : end;
  const labels = domain.split('.');
  // The longest cut ending in a known top-level domain, else the whole domain if its last label could be one.
  for (let count = labels.length; count >= 2; count--) {
    if (isKnownTopLevel(labels[count - 1])) return at + 1 + labels.slice(0, count).join('.').length;
  }
  return couldBeTopLevel(labels[labels.length - 1]) ? end : undefined;
}

/** A name of two letters or more that is no file extension: a top-level domain of one's own network, say. */
function couldBeTopLevel(label: string): boolean {
  return /^\p{L}{2,}$/u.test(label) && !FILE_EXTENSIONS.has(label.toLowerCase());
}

function isKnownTopLevel(label: string): boolean {
  const lower = label.toLowerCase();
  return KNOWN_TOP_LEVEL.has(lower) || /^xn--[a-z0-9-]+$/.test(lower);
}
