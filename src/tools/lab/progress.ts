/**
 * Progress of the long tools (router training, the evaluation, the first start's demo build): phases
 * with a total, told each step. `terminalProgress` draws it with cli-progress on stderr; `lineProgress`
 * writes a plain line now and then instead, for output that is not a terminal (a log, a CI job, a pipe),
 * where a bar's redraws would be noise; `progressFor` picks one of the two for a stream.
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

export interface LineProgressOptions {
  /** The least time between two lines of one phase (its first line is written at once). */
  intervalMs?: number;
  now?: () => number;
}

/**
 * A `ProgressReporter` that writes `[12 s] teacher forcing: 120/400 (30%)` lines: one as each phase
 * starts, then at most one per `intervalMs` while it runs. Seconds count from the reporter's creation.
 */
export function lineProgress(write: (line: string) => void, options: LineProgressOptions = {}): ProgressReporter {
  const { intervalMs = 5_000, now = () => performance.now() } = options;
  const created = now();
  let phase = '';
  let total = 0;
  let lastAt = -Infinity;
  const line = (value: number, detail: string) => {
    lastAt = now();
    const share = total > 0 ? ` (${Math.round((value / total) * 100)}%)` : '';
    write(`[${Math.round((lastAt - created) / 1000)} s] ${phase}: ${value}/${total}${share}${detail ? ` ${detail}` : ''}`);
  };
  return {
    start(name, count) {
      phase = name;
      total = count;
      line(0, '');
    },
    update(value, detail = '') {
      if (now() - lastAt >= intervalMs) line(value, detail);
    },
    stop() {},
  };
}

/** A bar on a terminal, plain lines on anything else. */
export function progressFor(stream: NodeJS.WriteStream = process.stderr): ProgressReporter {
  return terminalProgress(stream) ?? lineProgress((line) => stream.write(`${line}\n`));
}
