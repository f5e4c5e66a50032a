/** A `ProgressReporter` drawn with cli-progress on stderr; none at all when stderr is not a terminal. */
import { Presets, SingleBar } from 'cli-progress';
import type { ProgressReporter } from './train-router.ts';

export function terminalProgress(stream: NodeJS.WriteStream = process.stderr): ProgressReporter | undefined {
  if (!stream.isTTY) return undefined;
  let bar: SingleBar | undefined;
  return {
    start(phase, total) {
      bar = new SingleBar(
        { stream, format: `${phase.padEnd(16)} [{bar}] {value}/{total} {detail}`, hideCursor: true, clearOnComplete: false },
        Presets.shades_classic,
      );
      bar.start(total, 0, { detail: '' });
    },
    update(value, detail = '') {
      bar?.update(value, { detail });
    },
    stop() {
      bar?.stop();
      bar = undefined;
    },
  };
}
