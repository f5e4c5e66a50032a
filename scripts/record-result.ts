/**
 * Runs one benchmark or evaluation command that ends its output with a `--json` line and saves that line
 * under docs/results/, after a first line naming the command, the date and the machine (CPU model, cores,
 * load averages at the start and the end), so that docs/results.md can be rendered from it
 * (scripts/results-md.ts) and every figure there traces back to a command and a machine.
 *
 * @example
 * ```sh
 * bun run results:record demo-shim -- bun run bench shim --json
 * # writes docs/results/demo-shim.jsonl: {"command":"bun run bench shim --json","date":...} then the bench's JSON
 * ```
 */
import { cpus, loadavg } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Where the data files live, relative to the repository root. */
export const RESULTS_DIR = 'docs/results';

/** The first line of a data file: what made the second line, when and where. */
export interface RunHeader {
  command: string;
  date: string;
  machine: { cpu: string; cores: number; load_average_start: number[]; load_average_end: number[] };
}

function roundedLoad(): number[] {
  return loadavg().map((value) => Math.round(value * 100) / 100);
}

/** The CPU model as /proc/cpuinfo names it (the same string os.cpus() reads). */
function cpuModel(): string {
  return cpus()[0]?.model.trim() ?? 'unknown';
}

/** An argument as a shell would need it typed, so the saved command can be pasted back as it ran. */
function shellWord(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`;
}

async function main(argv: string[]): Promise<void> {
  const separator = argv.indexOf('--');
  const name = argv[0];
  const command = argv.slice(separator + 1);
  if (!name || separator !== 1 || command.length === 0) {
    throw new Error('usage: bun run results:record NAME -- COMMAND [ARGS...] (the command must print --json output last)');
  }
  if (!/^[a-z0-9][a-z0-9.-]*$/.test(name)) throw new Error(`NAME must be lower-case letters, digits, dots and dashes, got "${name}"`);
  const loadAtStart = roundedLoad();
  const date = new Date().toISOString();
  const child = Bun.spawn(command, { stdout: 'pipe', stderr: 'inherit' });
  const stdout = await new Response(child.stdout).text();
  const status = await child.exited;
  process.stdout.write(stdout);
  if (status !== 0) throw new Error(`"${command.join(' ')}" exited with status ${status}; nothing saved`);
  const lastLine = stdout.trimEnd().split('\n').at(-1) ?? '';
  // Parsing here catches a command run without --json before a file is written that the renderer would refuse.
  JSON.parse(lastLine);
  const header: RunHeader = {
    command: command.map(shellWord).join(' '),
    date,
    machine: { cpu: cpuModel(), cores: cpus().length, load_average_start: loadAtStart, load_average_end: roundedLoad() },
  };
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${name}.jsonl`);
  writeFileSync(path, `${JSON.stringify(header)}\n${lastLine}\n`);
  console.error(`saved ${path}`);
}

if (import.meta.main) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  });
}
