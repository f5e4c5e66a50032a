/**
 * One evaluation from options to report: read the data set, load the edge pack, the cloud pack (served
 * in process) and the router, run the sweep for the data set's kind, release everything.
 *
 * @example
 * const report = await runEvaluation(parseEvalOptions(['--dataset', 'stories.txt', '--limit', '20']));
 * console.log(formatMarkdown(report));
 */
import { existsSync } from 'node:fs';
import { relative, resolve, sep } from 'node:path';
import { loadRouter } from '../../edge/router.ts';
import { DecoderModel } from '../../shared/decoder-model.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack, type ModelPack } from '../../shared/model-pack.ts';
import { DEMO, PROJECT_ROOT } from '../../shared/paths.ts';
import { TextTokenizer } from '../../shared/tokenizer.ts';
import { checkSameVocabulary } from '../router/teacher-forcing.ts';
import { splitByParagraph } from '../router/text-corpus.ts';
import type { ProgressReporter } from '../router/train-router.ts';
import { evaluateChoices } from './choice-eval.ts';
import { readEvalDataset } from './eval-dataset.ts';
import { DEFAULT_MAX_NEW_TOKENS, type EvalOptions } from './eval-options.ts';
import type { EvalReport } from './eval-report.ts';
import { InProcessCloud } from './in-process-cloud.ts';
import { evaluateText } from './text-eval.ts';

const DEMO_PATHS = new Set<string>([DEMO.edgePack, DEMO.cloudPack, DEMO.routerPack]);

function loadPack(dir: string, file: string | undefined): ModelPack {
  if (!existsSync(dir) && DEMO_PATHS.has(resolve(dir))) {
    throw new AppError('NOT_FOUND', `${dir} does not exist: build the demo packs first with \`bun run models demo\``);
  }
  return loadModelPack(dir, file);
}

/** A path as it is best shown: relative to the project when inside it or beside it (../shared/assets). */
function shown(path: string): string {
  const rel = relative(PROJECT_ROOT, resolve(path));
  return rel.startsWith(`..${sep}..`) ? resolve(path) : rel;
}

export async function runEvaluation(o: EvalOptions, progress?: ProgressReporter): Promise<EvalReport> {
  const dataset = readEvalDataset(o.dataset);
  if (o.routerPack && !existsSync(o.routerPack) && DEMO_PATHS.has(resolve(o.routerPack))) {
    throw new AppError('NOT_FOUND', `${o.routerPack} does not exist: build the demo packs first with \`bun run models demo\``);
  }
  const slmPack = loadPack(o.slm, o.slmFile);
  const llmPack = loadPack(o.llm, o.llmFile);
  checkSameVocabulary(slmPack, llmPack);
  const tokenizer = await TextTokenizer.fromPack(slmPack.dir);
  const router = await loadRouter(o.routerPack);
  const slm = await DecoderModel.load(slmPack);
  const llm = await DecoderModel.load(llmPack);
  const cloud = new InProcessCloud(llm, { record: false, tokenVocabSize: tokenizer.vocabSize });
  const edge = { slm, tokenizer, cloud };
  try {
    const common = {
      dataset: shown(dataset.path),
      format: dataset.format,
      slm: shown(slmPack.dir),
      llm: shown(llmPack.dir),
      router: o.routerPack ? shown(o.routerPack) : router.info.name,
      seed: o.seed,
    };
    if (dataset.kind === 'text') {
      const all = dataset.paragraphs;
      const { train, heldOut } = splitByParagraph(all, o.fromFraction);
      const paragraphs = heldOut.slice(0, o.limit ?? heldOut.length);
      if (paragraphs.length === 0) throw new AppError('INVALID_ARGUMENT', `${o.dataset}: no paragraphs after the first ${o.fromFraction} of ${all.length}`);
      const result = await evaluateText({
        edge,
        llm,
        router,
        routerPack: o.routerPack,
        paragraphs,
        thresholds: o.thresholds,
        seed: o.seed,
        continuations: o.continuations,
        prefixTokens: o.prefixTokens,
        maxNewTokens: o.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS.text,
        calibrationRuns: o.calibrationRuns,
        tolerance: o.tolerance,
        progress,
      });
      const selection = `paragraphs ${train.length + 1}–${train.length + paragraphs.length} of ${all.length} (after the first ${o.fromFraction * 100}%)`;
      return { ...common, selection, result };
    }
    const questions = dataset.questions.slice(0, o.limit ?? dataset.questions.length);
    const result = await evaluateChoices({
      edge,
      router,
      questions,
      thresholds: o.thresholds,
      seed: o.seed,
      maxNewTokens: o.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS['multiple-choice'],
      calibrationRuns: o.calibrationRuns,
      tolerance: o.tolerance,
      progress,
    });
    return { ...common, selection: `questions 1–${questions.length} of ${dataset.questions.length}`, result };
  } finally {
    await cloud.close();
    await router.release();
    await slm.release();
    await llm.release();
  }
}
