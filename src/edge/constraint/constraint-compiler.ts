/**
 * Compiles constraints for one tokenizer with xgrammar, and keeps what it compiled by content: the same
 * schema, grammar, pattern or choices asked again is a map lookup. A refusal is kept too, so a request
 * that failed to compile (or compiled too slowly) costs nothing the next time. The tokenizer's
 * preprocessed vocabulary is built at the first constrained request, not at start.
 *
 * JSON is compiled compact (`{"a": 1, "b": [2]}`, no free whitespace), a structural tag's too: a model that
 * may write any amount of whitespace between tokens can spend its whole token budget on it.
 *
 * @example
 * const compiler = new ConstraintCompiler(tokenizer, edgeModel.pack.vocabSize, [...eosIds]);
 * const grammar = await compiler.compile({ kind: 'regex', text: '[0-9]{3}' });
 * compiler.compiled({ kind: 'regex', text: '[0-9]{3}' }) === grammar; // true
 */
import type { CompiledGrammar, GrammarCompiler, TokenizerInfo } from '@mlc-ai/web-xgrammar';
import { AppError } from '../../shared/errors.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import type { ConstraintSpec } from './constraint-spec.ts';
import { compactStructuralTag } from './compact-structural-tag.ts';
import { loadXGrammar, refusalOf } from './xgrammar-module.ts';

/**
 * The most one compile may take. A compile runs to its end on the edge's one thread (WebAssembly cannot be
 * interrupted), so a slower one is refused after it finishes, and its refusal is kept: it never runs again.
 * MAX_CONSTRAINT_CHARS keeps a single compile near this bound.
 */
export const COMPILE_LIMIT_MS = 2_000;
/** Compiled constraints kept, least recently used first out. */
const CACHE_ENTRIES = 64;

/** xgrammar's EBNF for "one of these strings": each a quoted literal (JSON's escapes are EBNF's). */
export function choiceGrammar(choices: readonly string[]): string {
  return `root ::= ${choices.map((c) => JSON.stringify(c)).join(' | ')}`;
}

export class ConstraintCompiler {
  private ready: Promise<{ compiler: GrammarCompiler; info: TokenizerInfo }> | undefined;
  private readonly cache = new Map<string, CompiledGrammar | AppError>();

  constructor(
    readonly tokenizer: TextTokenizer,
    /** The model's logits width (Qwen pads its embedding past the tokenizer's ids). */
    readonly logitsSize: number,
    readonly stopIds: readonly number[],
  ) {}

  private start(): Promise<{ compiler: GrammarCompiler; info: TokenizerInfo }> {
    this.ready ??= (async () => {
      const xg = await loadXGrammar();
      const { tokenizer } = this;
      // SentencePiece vocabularies (byte_fallback) spell a word's leading space as ▁ and add one before the text.
      const info = await xg.TokenizerInfo.createTokenizerInfo(
        tokenizer.encodedVocabulary(),
        tokenizer.vocabularyKind,
        tokenizer.vocabularyKind === 'byte_fallback',
        Math.max(this.logitsSize, tokenizer.vocabSize),
        [...this.stopIds],
      );
      return { compiler: await xg.GrammarCompiler.createGrammarCompiler(info, true), info };
    })();
    return this.ready;
  }

  /** The compiled constraint, when it is in the cache. */
  compiled(spec: ConstraintSpec): CompiledGrammar | undefined {
    const entry = this.cache.get(keyOf(spec));
    return entry instanceof AppError ? undefined : entry;
  }

  /** Compiles `spec` (or finds it compiled); INVALID_ARGUMENT naming the cause when xgrammar refuses it or it takes too long. */
  async compile(spec: ConstraintSpec): Promise<CompiledGrammar> {
    const key = keyOf(spec);
    const hit = this.cache.get(key);
    if (hit) {
      this.cache.delete(key);
      this.cache.set(key, hit);
      if (hit instanceof AppError) throw hit;
      return hit;
    }
    const { compiler } = await this.start();
    const t = performance.now();
    let entry: CompiledGrammar | AppError;
    try {
      entry = await refusalOf(spec.name ?? spec.kind, () => compileWith(compiler, spec));
      const ms = performance.now() - t;
      if (ms > COMPILE_LIMIT_MS) {
        entry.dispose();
        entry = new AppError(
          'INVALID_ARGUMENT',
          `${spec.name ?? spec.kind} took ${Math.round(ms)} ms to compile, above the limit of ${COMPILE_LIMIT_MS} ms: simplify it`,
        );
      }
    } catch (e) {
      if (!(e instanceof AppError)) throw e;
      entry = e;
    }
    this.keep(key, entry);
    if (entry instanceof AppError) throw entry;
    return entry;
  }

  private keep(key: string, entry: CompiledGrammar | AppError): void {
    this.cache.set(key, entry);
    while (this.cache.size > CACHE_ENTRIES) {
      const [oldest, value] = this.cache.entries().next().value!;
      this.cache.delete(oldest);
      // A matcher holds its own reference to the compiled grammar: disposing the cache's is safe.
      if (!(value instanceof AppError)) value.dispose();
    }
  }
}

function keyOf(spec: ConstraintSpec): string {
  return `${spec.kind}\u0000${spec.name ?? ''}\u0000${spec.text}`;
}

async function compileWith(compiler: GrammarCompiler, spec: ConstraintSpec): Promise<CompiledGrammar> {
  switch (spec.kind) {
    case 'json_schema':
      return compiler.compileJSONSchema(spec.text, false, -1);
    case 'json_object':
      // Not strict: any object, with whatever properties the model writes.
      return compiler.compileJSONSchema('{"type": "object"}', false, -1, undefined, false);
    case 'grammar':
      return compiler.compileGrammar(spec.text);
    case 'regex':
      return compiler.compileStructuralTag({ type: 'structural_tag', format: { type: 'regex', pattern: spec.text } });
    case 'choice':
      return compiler.compileGrammar(choiceGrammar(spec.choices ?? []));
    case 'structural_tag':
      return compiler.compileStructuralTag(await compactStructuralTag(spec.text));
  }
}
