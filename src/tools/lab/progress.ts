/**
 * Progress of the long tools (router training, the evaluation): phases with a total, told each step.
 * `terminalProgress` draws it with cli-progress on stderr.
 *
 * @example
 * const progress = terminalProgress();
 * progress?.start('teacher forcing', paragraphs.length);
 */
import { Presets, SingleBar } from 'cli-progress';

/** What the tools tell while they work; optional everywhere, so tests and non-terminals pass none. */
export interface ProgressReporter {
  start(phase: string, total: number): void;
  update(value: number, detail?: string): void;
  stop(): void;
}

/** A `ProgressReporter` drawn on `stream`; none at all when it is not a terminal. */
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
