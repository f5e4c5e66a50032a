/**
 * A transcription of llama2.c's `encode(t, text, bos, eos, tokens, n_tokens)` from run.c, to check the
 * converted tokenizer.json against. It works on bytes as the C code does: every string below is a
 * "byte string" (one UTF-16 unit per byte), so concatenation and lookup compare bytes exactly.
 * The only liberty taken: the vocabulary lookup of a concatenated pair is memoized per pair of ids,
 * which changes nothing but the running time.
 */
export class Llama2cReferenceEncoder {
  private readonly vocab: string[];
  private readonly idOf: Map<string, number>;
  private readonly mergedId = new Map<number, number>();

  constructor(
    pieces: readonly string[],
    private readonly scores: readonly number[],
  ) {
    this.vocab = pieces.map(toByteString);
    this.idOf = new Map(this.vocab.map((piece, id) => [piece, id] as const));
  }

  encode(text: string, bos: boolean, eos: boolean): number[] {
    const bytes = new TextEncoder().encode(text);
    const tokens: number[] = [];
    if (bos) tokens.push(1);
    // add_dummy_prefix: the " " token in front of any non-empty text.
    if (bytes.length > 0) tokens.push(this.lookup(' '));
    // One token per UTF-8 code point (a lead byte and up to 3 continuation bytes), else its bytes + 3.
    let buffer = '';
    for (let i = 0; i < bytes.length; i++) {
      if ((bytes[i]! & 0xc0) !== 0x80) buffer = '';
      buffer += String.fromCharCode(bytes[i]!);
      if (i + 1 < bytes.length && (bytes[i + 1]! & 0xc0) === 0x80 && buffer.length < 4) continue;
      const id = this.lookup(buffer);
      if (id !== -1) tokens.push(id);
      else for (let j = 0; j < buffer.length; j++) tokens.push(buffer.charCodeAt(j) + 3);
      buffer = '';
    }
    // Merge the adjacent pair whose concatenation has the best score, first one on ties, until none is left.
    for (;;) {
      let bestScore = -1e10;
      let bestId = -1;
      let bestIndex = -1;
      for (let i = 0; i < tokens.length - 1; i++) {
        const id = this.merge(tokens[i]!, tokens[i + 1]!);
        if (id !== -1 && this.scores[id]! > bestScore) {
          bestScore = this.scores[id]!;
          bestId = id;
          bestIndex = i;
        }
      }
      if (bestIndex === -1) break;
      tokens.splice(bestIndex, 2, bestId);
    }
    if (eos) tokens.push(2);
    return tokens;
  }

  private lookup(byteString: string): number {
    return this.idOf.get(byteString) ?? -1;
  }

  private merge(left: number, right: number): number {
    const key = left * this.vocab.length + right;
    let id = this.mergedId.get(key);
    if (id === undefined) {
      id = this.lookup(this.vocab[left]! + this.vocab[right]!);
      this.mergedId.set(key, id);
    }
    return id;
  }
}

function toByteString(text: string): string {
  return String.fromCharCode(...new TextEncoder().encode(text));
}
