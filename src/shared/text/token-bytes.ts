/**
 * The bytes each token of a vocabulary writes, read from its token string as the tokenizer's decoder spells
 * them (tokenizer.ts's `vocabularyKind`): GPT-2's byte-level alphabet, SentencePiece's `<0xNN>` byte pieces
 * and `▁` spaces, or plain text. What a grammar bound needs (constraint/fewest-tokens.ts) and what OpenAI's
 * `logprobs` report as a token's `bytes`: a token may write part of a character, which no text can show.
 *
 * @example
 * tokenByteString('Ġhello', 'byte_level', byteLevelAlphabet()); // ' hello', one character per byte
 * new TokenBytes(tokenizer).of(id);                              // Uint8Array of the bytes token `id` writes
 */
import type { TextTokenizer } from './tokenizer.ts';

/** GPT-2's byte-level alphabet: the character each byte is written as, read backwards. */
export function byteLevelAlphabet(): Map<string, number> {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const map = new Map<string, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) map.set(String.fromCodePoint(printable(b) ? b : 256 + extra++), b);
  return map;
}

/** A text's UTF-8 bytes, one character per byte. */
export function utf8ByteString(text: string): string {
  return String.fromCharCode(...new TextEncoder().encode(text));
}

/** The bytes a token string writes, one character per byte; undefined when it is not spelled as `kind` says. */
export function tokenByteString(token: string, kind: TextTokenizer['vocabularyKind'], byteLevel: Map<string, number>): string | undefined {
  if (kind === 'byte_level') {
    let out = '';
    for (const c of token) {
      const b = byteLevel.get(c);
      if (b === undefined) return undefined;
      out += String.fromCharCode(b);
    }
    return out;
  }
  if (kind === 'byte_fallback') {
    const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(token);
    return byte ? String.fromCharCode(parseInt(byte[1]!, 16)) : utf8ByteString(token.replaceAll('\u2581', ' '));
  }
  return utf8ByteString(token);
}

/** One tokenizer's tokens as bytes, read once per token asked for. */
export class TokenBytes {
  private readonly vocabulary: string[];
  private readonly byteLevel = byteLevelAlphabet();
  private readonly known = new Map<number, Uint8Array>();

  constructor(private readonly tokenizer: TextTokenizer) {
    this.vocabulary = tokenizer.encodedVocabulary();
  }

  /** The bytes token `id` writes: none for a special token; its text's for a token not spelled as bytes. */
  of(id: number): Uint8Array {
    let bytes = this.known.get(id);
    if (bytes) return bytes;
    const token = this.vocabulary[id] ?? '';
    const byteString = this.tokenizer.isSpecialId(id) ? '' : tokenByteString(token, this.tokenizer.vocabularyKind, this.byteLevel);
    bytes = byteString === undefined ? new TextEncoder().encode(this.tokenizer.decode([id])) : Uint8Array.from(byteString, (c) => c.charCodeAt(0));
    this.known.set(id, bytes);
    return bytes;
  }
}
