/**
 * A `bun run bench <target>` run as its user runs it: a child process, its exit code and output, and the
 * JSON object that `--json` prints as the last line of stdout.
 *
 * @example
 * const r = runBench(['fleet', '--edges', '1', '--json']);
 * expect(r.code).toBe(0);
 * const { rows } = lastJsonLine(r.stdout);
 */
export interface BenchRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runBench(args: string[], timeoutMs = 90_000): BenchRun {
  const r = Bun.spawnSync(['bun', 'src/tools/bench/cli.ts', ...args], { stdout: 'pipe', stderr: 'pipe', timeout: timeoutMs });
  return { code: r.exitCode, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/** The object a `--json` run printed last. */
export function lastJsonLine(stdout: string) {
  return JSON.parse(stdout.trim().split('\n').at(-1)!);
}
