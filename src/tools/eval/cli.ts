/** `bun run eval --dataset FILE [flags]`: the routing threshold sweep with its baselines (see EVAL_USAGE). */
import { AppError } from '../../shared/errors.ts';
import { runCli, wantsHelp } from '../cli-support.ts';
import { terminalProgress } from '../lab/progress.ts';
import { EVAL_USAGE, parseEvalOptions } from './eval-options.ts';
import { checkEvalOutputs, plotPrefix, writePlots } from './eval-outputs.ts';
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
  checkEvalOutputs(options);
  const report = await runEvaluation(options, terminalProgress(), (line) => console.error(line));
  console.log(formatMarkdown(report));
  if (options.out) {
    for (const path of await writePlots(options, await evalPlots(report.result, plotPrefix(options)))) console.error(`wrote ${path}`);
  }
  if (options.json) console.log(JSON.stringify(toJson(report)));
  // A private value that reached the cloud is a bug, not a figure: the run fails (and results:record saves nothing).
  if (report.result.kind === 'private-spans' && !report.result.leakCheck.passed) {
    throw new AppError('INTERNAL', 'leak check failed: an inserted entity reached the cloud in a run with pseudonyms');
  }
}

await runCli(main, EVAL_USAGE);
