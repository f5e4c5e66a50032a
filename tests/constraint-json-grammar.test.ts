/**
 * The JSON schema grammar the edge compiles (json-grammar.ts: xgrammar's conversion with its string rule
 * written as a repetition) holds outputs to the same language as xgrammar's own compileJSONSchema: the
 * same strings accepted and refused, and, over the real Qwen vocabulary, the same next-token mask at every
 * step of seeded random walks through each grammar.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CompiledGrammar, GrammarCompiler } from '@mlc-ai/web-xgrammar';
import { jsonSchemaGrammar, withRepeatedStrings } from '../src/edge/constraint/json-grammar.ts';
import { loadXGrammar, type XGrammar } from '../src/edge/constraint/xgrammar-module.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { writeRandomPack } from '../src/tools/models/random-pack.ts';

const work = mkdtempSync(join(tmpdir(), 'json-grammar-'));
let xg: XGrammar;
let compiler: GrammarCompiler;
let stops: number[];
/** Ids whose text holds a quote (GPT-2's byte-level alphabet writes '"' as itself). */
let quoteIds: Set<number>;

const SCHEMAS: Record<string, { text: string; strict: boolean }> = {
  strings: {
    text: JSON.stringify({
      type: 'object',
      properties: { name: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } }, n: { type: 'integer' } },
      required: ['name', 'tags', 'n'],
      additionalProperties: false,
    }),
    strict: true,
  },
  nested: {
    text: JSON.stringify({
      type: 'object',
      properties: { inner: { type: 'object', properties: { s: { type: 'string' }, e: { enum: ['a"b', 'c'] } }, required: ['s'] } },
      required: ['inner'],
    }),
    strict: true,
  },
  'any object': { text: '{"type": "object"}', strict: false },
};

beforeAll(async () => {
  xg = await loadXGrammar();
  const dir = join(work, 'qwen');
  await writeRandomPack({ preset: 'tiny-qwen2', out: dir, seed: 1, hiddenStatesOutput: false });
  const tokenizer = await TextTokenizer.fromPack(dir);
  const pack = loadModelPack(dir);
  stops = [...new Set([...pack.eosTokenIds, ...tokenizer.eosIds])];
  quoteIds = new Set(tokenizer.encodedVocabulary().flatMap((token, id) => (token.includes('"') ? [id] : [])));
  const info = await xg.TokenizerInfo.createTokenizerInfo(
    tokenizer.encodedVocabulary(),
    tokenizer.vocabularyKind,
    false,
    Math.max(pack.vocabSize, tokenizer.vocabSize),
    stops,
  );
  compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
}, 120_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

async function both(name: string): Promise<{ theirs: CompiledGrammar; ours: CompiledGrammar; ebnf: string }> {
  const { text, strict } = SCHEMAS[name]!;
  const ebnf = await jsonSchemaGrammar(xg, text, strict);
  return { theirs: await compiler.compileJSONSchema(text, false, -1, undefined, strict), ours: await compiler.compileGrammar(ebnf), ebnf };
}

/** A seeded generator in [0, 1). */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

function allowedIds(mask: Int32Array): number[] {
  const ids: number[] = [];
  for (let word = 0; word < mask.length; word++) for (let bit = 0; bit < 32; bit++) if ((mask[word]! >>> bit) & 1) ids.push(word * 32 + bit);
  return ids;
}

describe('the JSON schema grammar with repeated strings', () => {
  test("xgrammar's string rule is the one replaced (a new xgrammar that prints it otherwise fails here)", async () => {
    const grammar = await xg.Grammar.fromJSONSchema(SCHEMAS.strings!.text, false, -1, undefined, true);
    const printed = grammar.toString();
    grammar.dispose();
    expect(withRepeatedStrings(printed)).not.toBe(printed);
    expect(await jsonSchemaGrammar(xg, SCHEMAS.strings!.text, true)).toContain('basic_string_sub ::= (([^');
  });

  test('the same texts accepted and refused', async () => {
    const texts = [
      '{"name": "Ann", "tags": [], "n": 1}',
      '{"name": "a \\"quoted\\" \\\\ \\u00e9 \\n", "tags": ["x", ""], "n": -3}',
      '{"name": "ünïcödé 漢字 😀", "tags": ["a,b", "}"], "n": 0}',
      '{"name": "", "tags": ["\\/"], "n": 10}',
      '{"name": "bad \\q escape", "tags": [], "n": 1}',
      '{"name": "raw\nnewline", "tags": [], "n": 1}',
      '{"name": "unclosed, "tags": [], "n": 1}',
      '{"name": "a""b", "tags": [], "n": 1}',
      '{"name": "a", "tags": [], "n": 1, "extra": 2}',
      '{"name":"compact","tags":[],"n":1}',
    ];
    const verdicts: boolean[] = [];
    for (const name of Object.keys(SCHEMAS)) {
      const { text, strict } = SCHEMAS[name]!;
      const theirs = await xg.Grammar.fromJSONSchema(text, false, -1, undefined, strict);
      const ours = await xg.Grammar.fromEBNF(await jsonSchemaGrammar(xg, text, strict));
      for (const sample of [...texts, '{"inner": {"s": "x \\" y", "e": "a\\"b"}}', '{"inner": {"s": "x"y"}}', '{"k": ["v", {"w": "\\u12"}]}', '{"k": "v"}']) {
        const expected = await xg.Testings.isGrammarAcceptString(theirs, sample);
        verdicts.push(expected);
        expect(`${name} ${sample} ${await xg.Testings.isGrammarAcceptString(ours, sample)}`).toBe(`${name} ${sample} ${expected}`);
      }
      theirs.dispose();
      ours.dispose();
    }
    // Both verdicts occur: the texts tell the languages apart.
    expect(verdicts.filter((v) => v).length).toBeGreaterThan(4);
    expect(verdicts.filter((v) => !v).length).toBeGreaterThan(4);
  }, 60_000);

  test('over the Qwen vocabulary: the same next-token mask at every step of seeded random walks', async () => {
    for (const name of Object.keys(SCHEMAS)) {
      const { theirs, ours } = await both(name);
      let steps = 0;
      for (let walk = 0; walk < 6; walk++) {
        const random = seeded(walk + 1);
        const a = await xg.GrammarMatcher.createGrammarMatcher(theirs, stops);
        const b = await xg.GrammarMatcher.createGrammarMatcher(ours, stops);
        for (let step = 0; step < 40 && !a.isTerminated(); step++) {
          const [maskA, maskB] = [await a.getNextTokenBitmask(), await b.getNextTokenBitmask()];
          expect(maskB).toEqual(maskA);
          const ids = allowedIds(maskA);
          // Tokens with a quote in them a third of the time: strings end and the walk gets through the object.
          const quoted = random() < 0.33 ? ids.filter((id) => quoteIds.has(id)) : [];
          const from = quoted.length > 0 ? quoted : ids;
          const id = from[Math.floor(random() * from.length)]!;
          expect(b.acceptToken(id)).toBe(a.acceptToken(id));
          steps++;
        }
        a.dispose();
        b.dispose();
      }
      expect(steps).toBeGreaterThan(60);
      theirs.dispose();
      ours.dispose();
    }
  }, 120_000);
});
