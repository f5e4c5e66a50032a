/**
 * One evaluation from options to report: read the data set, load the edge pack and the router (checked
 * against each other by loadEdgeEngine), the cloud pack (served in process), run the sweep for the data
 * set's kind (or, with --private-entities, what private spans cost on the text), release everything.
 *
 * @example
 * const report = await runEvaluation(parseEvalOptions(['--dataset', 'stories.txt', '--limit', '20']));
 * console.log(formatMarkdown(report));
 */
import { existsSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { loadEdgeEngine } from '../../edge/server/load-edge-engine.ts';
import type { RouterJson } from '../../edge/routing/router.ts';
import { AppError } from '../../shared/errors.ts';
import { loadModelPack, readJsonFile, type ModelPack } from '../../shared/model/model-pack.ts';
import { CHAT_DEMO, DEMO, PROJECT_ROOT, TRUNCATED_DEMO } from '../../shared/paths.ts';
import { splitByParagraph } from '../lab/text-corpus.ts';
import type { ProgressReporter } from '../lab/progress.ts';
import { chatTemplateFor } from '../lab/training-documents.ts';
import { evaluateChat } from './chat-eval.ts';
import { evaluateChoices } from './choice-eval.ts';
import { readEvalDataset } from './eval-dataset.ts';
import { DEFAULT_MAX_NEW_TOKENS, type EvalOptions } from './eval-options.ts';
import type { EvalReport } from './eval-report.ts';
import { openToolCloud, type CloudSource } from '../lab/tool-cloud.ts';
import { evaluatePrivateSpans } from './private-spans-eval.ts';
import { evaluateText } from './text-eval.ts';

const DEMO_PATHS = new Set<string>([...[DEMO, TRUNCATED_DEMO, CHAT_DEMO].flatMap((pair) => [pair.edgePack, pair.cloudPack, pair.routerPack])]);

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

/**
 * Which part of a text file is held out: all of it, unless it is the router's training text (router.json
 * records its sha256), whose first `train_fraction` (or --from-fraction) the router has seen.
 */
export function heldOutPart(o: Pick<EvalOptions, 'routerPack' | 'fromFraction' | 'dataset'>, sha256: string): { fraction: number; why: string } {
  const training =
    o.routerPack && existsSync(join(o.routerPack, 'router.json'))
      ? ((readJsonFile(join(o.routerPack, 'router.json')) as RouterJson).training as
          | { text_sha256?: string; train_fraction?: number; text?: string }
          | undefined)
      : undefined;
  if (training?.text_sha256 === sha256) {
    const fraction = o.fromFraction ?? training.train_fraction ?? 0.8;
    return { fraction, why: `the router's training text: the documents after the first ${+(fraction * 100).toFixed(2)}%` };
  }
  if (o.fromFraction !== undefined && o.routerPack) {
    throw new AppError(
      'INVALID_ARGUMENT',
      `--from-fraction applies only to the router's training text${training?.text ? ` (${training.text})` : ''}; ${o.dataset} is not it and is held out as a whole`,
    );
  }
  if (o.fromFraction !== undefined) return { fraction: o.fromFraction, why: `the documents after the first ${+(o.fromFraction * 100).toFixed(2)}%` };
  return { fraction: 0, why: o.routerPack ? "not the router's training text: held out as a whole" : 'all documents (built-in router, nothing trained)' };
}

export async function runEvaluation(o: EvalOptions, progress?: ProgressReporter, log: (line: string) => void = () => {}): Promise<EvalReport> {
  const dataset = readEvalDataset(o.dataset, o.split);
  if (o.constrainAnswer && dataset.kind !== 'multiple-choice') {
    throw new AppError('INVALID_ARGUMENT', `--constrain-answer applies to CommonsenseQA; ${o.dataset} is ${dataset.format}`);
  }
  if (o.routerPack && !existsSync(o.routerPack) && DEMO_PATHS.has(resolve(o.routerPack))) {
    throw new AppError('NOT_FOUND', `${o.routerPack} does not exist: build the demo packs first with \`bun run models demo\``);
  }
  const edgePack = loadPack(o.edgeModel, o.edgeModelFile);
  const cloudSource: CloudSource = o.cloud ? { shim: o.cloud } : { pack: loadPack(o.cloudModel, o.cloudModelFile) };
  const parts = await loadEdgeEngine({ edgeModel: edgePack, router: o.routerPack });
  const { edgeModel, tokenizer, router } = parts;
  const cloud = await openToolCloud(cloudSource, edgePack, tokenizer).catch(async (e: unknown) => {
    await parts.release();
    throw e;
  });
  const edge = { edgeModel, tokenizer, cloud: cloud.client };
  try {
    const common = {
      dataset: shown(dataset.path),
      format: dataset.format,
      edgeModel: shown(edgePack.dir),
      cloudModel: cloud.pack ? shown(cloud.pack.dir) : cloud.description,
      router: o.routerPack ? shown(o.routerPack) : router.info.name,
      seed: o.seed,
    };
    if (dataset.kind === 'text') {
      const all = dataset.paragraphs;
      const part = heldOutPart(o, dataset.sha256);
      const { train, heldOut } = splitByParagraph(all, part.fraction);
      const paragraphs = heldOut.slice(0, o.limit ?? heldOut.length);
      if (paragraphs.length === 0) throw new AppError('INVALID_ARGUMENT', `${o.dataset}: no documents after the first ${part.fraction} of ${all.length}`);
      const split = `${dataset.split}${o.split === 'auto' ? ' (auto-detected)' : ''}`;
      log(`${shown(dataset.path)}: ${all.length} documents, split ${split}; ${part.why}`);
      const selection = `documents ${train.length + 1}–${train.length + paragraphs.length} of ${all.length} (split ${split}; ${part.why})`;
      if (o.privateSpans) {
        const result = await evaluatePrivateSpans({
          edge,
          scorer: cloud.scorer,
          router,
          routerPack: o.routerPack,
          paragraphs,
          entities: o.privateSpans.entities,
          thresholds: o.privateSpans.thresholds ?? [router.info.defaultThreshold],
          seed: o.seed,
          continuations: o.continuations,
          maxNewTokens: o.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS.text,
          progress,
        });
        return { ...common, selection, result };
      }
      const result = await evaluateText({
        edge,
        scorer: cloud.scorer,
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
        shares: o.shares,
        routeShares: o.routeShares,
        dump: o.dump,
        force: o.force,
        progress,
        warn: log,
      });
      return { ...common, selection, result };
    }
    if (o.privateSpans) throw new AppError('INVALID_ARGUMENT', `--private-entities needs a text data set; ${o.dataset} is ${dataset.format}`);
    if (dataset.kind === 'chat') {
      const part = heldOutPart(o, dataset.sha256);
      const { train, heldOut } = splitByParagraph(dataset.conversations, part.fraction);
      const conversations = heldOut.slice(0, o.limit ?? heldOut.length);
      if (conversations.length === 0)
        throw new AppError('INVALID_ARGUMENT', `${o.dataset}: no conversations after the first ${part.fraction} of ${dataset.conversations.length}`);
      const template = chatTemplateFor(dataset, tokenizer, edgePack.dir, o.chatTemplate);
      const selection = `conversations ${train.length + 1}–${train.length + conversations.length} of ${dataset.conversations.length} (${part.why})`;
      const result = await evaluateChat({
        edge,
        scorer: cloud.scorer,
        router,
        routerPack: o.routerPack,
        path: dataset.path,
        conversations,
        template: template!,
        thresholds: o.thresholds,
        shares: o.shares,
        seed: o.seed,
        maxNewTokens: o.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS.chat,
        progress,
      });
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
      ...(o.chatTemplate ? { chatTemplate: o.chatTemplate } : {}),
      constrainAnswer: o.constrainAnswer,
    });
    return { ...common, selection: `questions 1–${questions.length} of ${dataset.questions.length}`, result };
  } finally {
    await cloud.close();
    await parts.release();
  }
}
