/**
 * Collects a child process's output stream as it arrives (so its pipe never fills) and lets a test wait,
 * with a bound, for a line that matches.
 *
 * @example
 * const stderr = collectOutput(child.stderr);
 * const line = await stderr.waitForLine((l) => l.includes('"edge ready"'), 30_000);
 */
export interface ProcessOutput {
  /** Everything read so far. */
  text(): string;
  lines(): string[];
  /** Resolves when the stream ends (the process closed it or exited). */
  readonly closed: Promise<void>;
  waitForLine(match: (line: string) => boolean, timeoutMs: number, what?: string): Promise<string>;
}

export function collectOutput(stream: ReadableStream<Uint8Array>): ProcessOutput {
  let text = '';
  const decoder = new TextDecoder();
  const closed = (async () => {
    const reader = stream.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
  })().catch(() => {});
  const lines = () => text.split('\n').filter((l) => l !== '');
  return {
    text: () => text,
    lines,
    closed,
    async waitForLine(match, timeoutMs, what = 'a line') {
      const until = performance.now() + timeoutMs;
      while (true) {
        const found = lines().find(match);
        if (found !== undefined) return found;
        if (performance.now() > until) throw new Error(`timed out waiting for ${what}; output so far:\n${text}`);
        await Bun.sleep(10);
      }
    },
  };
}

/** The JSON log lines (one object per line) of a process's stderr, skipping anything else. */
export function jsonLines(output: ProcessOutput): Record<string, unknown>[] {
  return output.lines().flatMap((l) => {
    try {
      const parsed: unknown = JSON.parse(l);
      return typeof parsed === 'object' && parsed !== null ? [parsed as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });
}

/** Settles with a child's exit code, or null when it is still running after `timeoutMs`. */
export async function exitWithin(child: { exited: Promise<number> }, timeoutMs: number): Promise<number | null> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const code = await Promise.race([child.exited, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), timeoutMs)))]);
  clearTimeout(timer);
  return code;
}
