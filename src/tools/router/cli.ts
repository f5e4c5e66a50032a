/** `bun run router <command>`: train a router pack, or evaluate one on held-out text. */
import { integerFlag, parseFlags, requireFlag, runCli, UsageError } from '../cli-support.ts';
import { evaluateRouter } from './evaluate-router.ts';
import { terminalProgress } from './progress-bar.ts';
import { DEFAULT_THRESHOLDS, formatRoutingCurve } from './routing-curve.ts';
import { DEFAULT_HIDDEN_UNITS, formatTrainReport, trainRouter } from './train-router.ts';

const USAGE = `usage: bun run router <command> [flags]

  train --slm PACK --llm PACK --text FILE --out DIR [--slm-file F] [--llm-file F] [--train-fraction 0.8] [--seed 0] [--epochs 30] [--hidden-units 64]
      teacher-force both packs over the first train-fraction of the text's paragraphs (blank-line
      separated), label each position (1 = keep the edge token, 0 = route) and train the MLP router;
      --slm-file / --llm-file name the ONNX file of a pack (model.onnx by default; e.g. model_q4.onnx)
  eval --router DIR --text FILE [--slm PACK] [--llm PACK] [--slm-file F] [--llm-file F] [--train-fraction 0.8] [--json]
      routed ratio and next-token accuracy per threshold on the paragraphs after the first train-fraction
      (the packs default to the ones router.json names)`;

function fractionFlag(values: Record<string, unknown>, name: string, fallback: number): number {
  const v = values[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (typeof v !== 'string' || v.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${name} must be a number, got ${JSON.stringify(v)}`);
  return n;
}

async function main(): Promise<void> {
  const [command, ...args] = process.argv.slice(2);
  switch (command) {
    case 'train': {
      const { values } = parseFlags(args, {
        slm: { type: 'string' },
        llm: { type: 'string' },
        'slm-file': { type: 'string' },
        'llm-file': { type: 'string' },
        text: { type: 'string' },
        out: { type: 'string' },
        'train-fraction': { type: 'string' },
        seed: { type: 'string' },
        epochs: { type: 'string' },
        'hidden-units': { type: 'string' },
      });
      const report = await trainRouter(
        {
          slm: requireFlag(values, 'slm'),
          llm: requireFlag(values, 'llm'),
          slmFile: values['slm-file'],
          llmFile: values['llm-file'],
          text: requireFlag(values, 'text'),
          out: requireFlag(values, 'out'),
          trainFraction: fractionFlag(values, 'train-fraction', 0.8),
          seed: integerFlag(values, 'seed', 0)!,
          maxEpochs: integerFlag(values, 'epochs', 30)!,
          hiddenUnits: integerFlag(values, 'hidden-units', DEFAULT_HIDDEN_UNITS)!,
        },
        terminalProgress(),
      );
      console.log(formatTrainReport(report));
      console.log(`wrote ${report.out}`);
      return;
    }
    case 'eval': {
      const { values } = parseFlags(args, {
        router: { type: 'string' },
        slm: { type: 'string' },
        llm: { type: 'string' },
        'slm-file': { type: 'string' },
        'llm-file': { type: 'string' },
        text: { type: 'string' },
        'train-fraction': { type: 'string' },
        json: { type: 'boolean' },
      });
      const curve = await evaluateRouter(
        {
          router: requireFlag(values, 'router'),
          slm: values.slm,
          llm: values.llm,
          slmFile: values['slm-file'],
          llmFile: values['llm-file'],
          text: requireFlag(values, 'text'),
          trainFraction: fractionFlag(values, 'train-fraction', 0.8),
          thresholds: DEFAULT_THRESHOLDS,
        },
        terminalProgress(),
      );
      console.log(values.json ? JSON.stringify(curve) : formatRoutingCurve(curve));
      return;
    }
    case undefined:
    case 'help':
    case '--help':
      console.log(USAGE);
      return;
    default:
      throw new UsageError(`unknown command ${command}`);
  }
}

await runCli(main, USAGE);
