/**
 * A request's constraint from its spec to its matcher: compiled once per content for the edge model's
 * tokenizer (one compiler per tokenizer, made at the first constrained request), checked against the
 * request's token budget, and opened as one generation's matcher. Entry points call `prepareConstraint`
 * before a generation starts, so a refusal is a status (HTTP 400, INVALID_ARGUMENT) and never a broken
 * stream; the loop's `openConstraint` then finds the grammar compiled.
 *
 * @example
 * await prepareConstraint(engine, request);           // throws INVALID_ARGUMENT naming the cause
 * const matcher = await openConstraint(engine, request); // GenerationState.openConstraint holds it
 */
import type { ModelPack } from '../../shared/model/model-pack.ts';
import { AppError } from '../../shared/errors.ts';
import type { TextTokenizer } from '../../shared/text/tokenizer.ts';
import type { ConstraintSpec } from './constraint-spec.ts';
import { ConstraintCompiler } from './constraint-compiler.ts';
import { fewestTokens } from './fewest-tokens.ts';
import { TokenConstraint } from './token-constraint.ts';
import { generationStopIds } from '../../shared/model/stop-ids.ts';

/** What the constraint needs of an engine: its model's logits width and end tokens, and its tokenizer. */
export interface ConstraintEngine {
  edgeModel: { pack: Pick<ModelPack, 'vocabSize' | 'eosTokenIds'> };
  tokenizer: TextTokenizer;
}

/** What it needs of a request. */
export interface ConstrainedRequest {
  constraint?: ConstraintSpec;
  maxNewTokens: number;
}

const compilers = new WeakMap<TextTokenizer, ConstraintCompiler>();

/** The end tokens a generation stops at (the loop's set): the pack's and the tokenizer's. */
export function stopIdsOf(engine: ConstraintEngine): number[] {
  return generationStopIds(engine.edgeModel.pack, engine.tokenizer);
}

/** The engine's compiler, one per tokenizer so every generation of a box shares its cache. */
export function compilerFor(engine: ConstraintEngine): ConstraintCompiler {
  let compiler = compilers.get(engine.tokenizer);
  if (!compiler) {
    compiler = new ConstraintCompiler(engine.tokenizer, engine.edgeModel.pack.vocabSize, stopIdsOf(engine));
    compilers.set(engine.tokenizer, compiler);
  }
  return compiler;
}

/**
 * Compiles the request's constraint and checks it can finish within the request's tokens: the text every
 * output must start with (xgrammar's jump-forward string) takes at least `fewestTokens` tokens to write.
 */
export async function prepareConstraint(engine: ConstraintEngine, request: ConstrainedRequest): Promise<void> {
  if (!request.constraint) return;
  const compiled = await compilerFor(engine).compile(request.constraint);
  const probe = await TokenConstraint.open(compiled, stopIdsOf(engine));
  try {
    const forced = probe.forcedText();
    const endsAfter = probe.acceptText(forced) && (await probe.mayEnd());
    // A choice is known whole: the fewest tokens of its shortest-to-write string.
    const { text, needed } = request.constraint.choices
      ? request.constraint.choices.map((c) => fewestTokens(c, true, engine.tokenizer)).reduce((a, b) => (b.needed < a.needed ? b : a))
      : fewestTokens(forced, endsAfter, engine.tokenizer);
    if (needed > request.maxNewTokens) {
      throw new AppError(
        'INVALID_ARGUMENT',
        `the ${request.constraint.name ?? request.constraint.kind} cannot be satisfied within ${request.maxNewTokens} tokens: ${request.constraint.choices ? 'its shortest choice to write,' : 'every output starts with'} ${JSON.stringify(text)}, takes at least ${needed}; raise the token limit`,
      );
    }
  } finally {
    probe.dispose();
  }
}

/** The generation's matcher, or undefined for a request without a constraint. */
export async function openConstraint(engine: ConstraintEngine, request: ConstrainedRequest): Promise<TokenConstraint | undefined> {
  if (!request.constraint) return undefined;
  const compiler = compilerFor(engine);
  const compiled = compiler.compiled(request.constraint) ?? (await compiler.compile(request.constraint));
  return TokenConstraint.open(compiled, stopIdsOf(engine));
}
