/**
 * Text folded to the form private values are matched in, with a map back to the text as written. A
 * tokenizer may hand back other characters than the ones typed: it normalizes (NFC, NFKC), cleans up
 * spaces before punctuation, lowercases, strips accents. Whatever it did, the folded forms of the typed value
 * and of the decoded text agree, so a value is found in every spelling a tokenizer could make of it.
 *
 * Folding works cluster by cluster (a character with the marks and conjoining jamo that follow it):
 * compatibility decomposition (NFKD), marks dropped, whitespace, format and control characters dropped,
 * decimal digits of any script as ASCII digits, and lowercase when asked. It errs towards hiding: "Zoë",
 * "Zoe", "ZOË" (with case folding) and "Z o e" fold alike.
 *
 * @example
 * foldString('Jose\u0301 Nu\u0301n\u0303ez', false); // 'JoseNunez'
 * const folded = new FoldedText(false);
 * folded.sync('Dr . José');  // folded.text === 'Dr.Jose'
 * folded.rawRange(3, 7);     // { start: 5, end: 9 }: 'José' as written
 */
import { decimalDigitValue } from './decimal-digit.ts';

/** A character and what extends it into one cluster: combining marks, ZWJ, Hangul vowel and final jamo. */
const CLUSTER = /[\s\S][\p{M}\u200D\u1160-\u11FF\uD7B0-\uD7FF]*/uy;
const DROPPED = /[\p{M}\p{Z}\p{Cf}\p{Cc}\s]/gu;
const DIGIT = /\p{Nd}/gu;

/** The folded form of one cluster (may be empty). */
export function foldCluster(cluster: string, foldCase: boolean): string {
  if (cluster.length === 1) {
    const code = cluster.charCodeAt(0);
    // ASCII controls and space fold to nothing, the rest of ASCII to itself.
    if (code <= 0x20 || code === 0x7f) return '';
    if (code < 0x7f) return foldCase ? cluster.toLowerCase() : cluster;
  }
  let folded = cluster.normalize('NFKD').replace(DROPPED, '').replace(DIGIT, asciiDigit);
  if (foldCase) folded = folded.toLowerCase().normalize('NFKD').replace(DROPPED, '');
  return folded;
}

/** The folded form of a whole string. */
export function foldString(text: string, foldCase: boolean): string {
  let out = '';
  for (let at = 0; at < text.length; ) {
    const cluster = clusterAt(text, at);
    out += foldCluster(cluster, foldCase);
    at += cluster.length;
  }
  return out;
}

function clusterAt(text: string, at: number): string {
  // Most text is ASCII: a character below U+0300 followed by another is a cluster of its own, no regex needed.
  if (text.charCodeAt(at) < 0x80 && !(text.charCodeAt(at + 1) >= 0x300)) return text[at]!;
  CLUSTER.lastIndex = at;
  return CLUSTER.exec(text)![0];
}

/** A decimal digit of any script as its ASCII digit. */
function asciiDigit(digit: string): string {
  return String(decimalDigitValue(digit.codePointAt(0)!));
}

/**
 * The folded form of a text that grows and is sometimes cut back (a token context's text), kept up to date
 * by folding only what changed.
 */
export class FoldedText {
  text = '';
  private raw = '';
  /** Per folded code unit, the raw cluster it came from (UTF-16 offsets, end exclusive). */
  private rawStarts: number[] = [];
  private rawEnds: number[] = [];
  /** Raw offsets where each folded cluster starts, and the folded length before it. */
  private clusterRaw: number[] = [];
  private clusterFolded: number[] = [];

  constructor(readonly foldCase: boolean) {}

  /** Brings the folded text to `raw`; returns the first folded index that changed. */
  sync(raw: string): number {
    // The text usually grows: then all of the old text is shared, found without a walk over it.
    let shared = raw.startsWith(this.raw) ? this.raw.length : 0;
    const limit = Math.min(raw.length, this.raw.length);
    while (shared < limit && raw.charCodeAt(shared) === this.raw.charCodeAt(shared)) shared++;
    if (shared === raw.length && shared === this.raw.length) return this.text.length;
    // The cluster that holds the first changed character, and the one before it (a mark may join it), are folded again.
    let keep = this.clusterRaw.length;
    while (keep > 0 && this.clusterRaw[keep - 1]! >= shared) keep--;
    if (keep > 0) keep--;
    const rawFrom = keep < this.clusterRaw.length ? this.clusterRaw[keep]! : this.raw.length;
    const foldedFrom = keep < this.clusterFolded.length ? this.clusterFolded[keep]! : this.text.length;
    this.clusterRaw.length = this.clusterFolded.length = keep;
    this.rawStarts.length = this.rawEnds.length = foldedFrom;
    let text = this.text.slice(0, foldedFrom);
    for (let at = Math.min(rawFrom, raw.length); at < raw.length; ) {
      const cluster = clusterAt(raw, at);
      const folded = foldCluster(cluster, this.foldCase);
      this.clusterRaw.push(at);
      this.clusterFolded.push(text.length);
      text += folded;
      for (let i = 0; i < folded.length; i++) {
        this.rawStarts.push(at);
        this.rawEnds.push(at + cluster.length);
      }
      at += cluster.length;
    }
    this.text = text;
    this.raw = raw;
    return foldedFrom;
  }

  /** The folded index where the raw text from `raw` on begins: the first cluster that starts there or later. */
  foldedAt(raw: number): number {
    let lo = 0;
    let hi = this.clusterRaw.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.clusterRaw[mid]! < raw) lo = mid + 1;
      else hi = mid;
    }
    return lo < this.clusterFolded.length ? this.clusterFolded[lo]! : this.text.length;
  }

  /** The raw characters folded units `[start, end)` came from. */
  rawRange(start: number, end: number): { start: number; end: number } {
    return { start: this.rawStarts[start]!, end: this.rawEnds[end - 1]! };
  }
}
