/** `bun run eval --dataset FILE [flags]`: the routing threshold sweep with its baselines (see EVAL_USAGE). */
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { AppError } from '../../shared/errors.ts';
import { runCli, wantsHelp } from '../cli-support.ts';
import { terminalProgress } from '../lab/progress.ts';
import { EVAL_USAGE, parseEvalOptions } from './eval-options.ts';
import { evalPlots } from './eval-plots.ts';
import { formatMarkdown, toJson } from './eval-report.ts';
import { runEvaluation } from './run-evaluation.ts';

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (wantsHelp(args)) {
    console.log(EVAL_USAGE);
    return;
  }
  const options = parseEvalOptions(args);
  const report = await runEvaluation(options, terminalProgress(), (line) => console.error(line));
  console.log(formatMarkdown(report));
  if (options.out) {
    mkdirSync(options.out, { recursive: true });
    const name = options.name ?? basename(options.dataset, extname(options.dataset));
    for (const [file, svg] of Object.entries(await evalPlots(report.result, name))) {
      writeFileSync(join(options.out, file), svg);
      console.error(`wrote ${join(options.out, file)}`);
    }
  }
  if (options.json) console.log(JSON.stringify(toJson(report)));
  // A private value that reached the cloud is a bug, not a figure: the run fails (and results:record saves nothing).
  if (report.result.kind === 'private-spans' && !report.result.leakCheck.passed) {
    throw new AppError('INTERNAL', 'leak check failed: an inserted entity reached the cloud in a run with pseudonyms');
  }
}

await runCli(main, EVAL_USAGE);
