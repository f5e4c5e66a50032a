/**
 * `bun run bench <target> [flags]`: performance measurements. Each target is its own module exporting
 * `USAGE` and `main(args)`; add one by adding a line to TARGETS (modules load only when chosen).
 */
import { runSubcommands, wantsHelp, type Subcommand } from '../cli-support.ts';

interface BenchTarget {
  USAGE: string;
  main(args: string[]): Promise<void>;
}

const TARGETS: Record<string, () => Promise<BenchTarget>> = {
  edge: () => import('./edge.ts'),
  decode: () => import('./decode.ts'),
  shim: () => import('./shim.ts'),
  latency: () => import('./latency.ts'),
  load: () => import('./load.ts'),
  'int8-kernels': () => import('./decode-int8-kernels.ts'),
  prefix: () => import('./prefix.ts'),
  concurrency: () => import('./concurrency.ts'),
  fleet: () => import('./fleet.ts'),
  affinity: () => import('./affinity.ts'),
  'embedded-batching': () => import('./embedded-batching.ts'),
  scoring: () => import('./scoring.ts'),
  'score-flood': () => import('./score-flood.ts'),
  constraint: () => import('./constraint.ts'),
};

/** A target as a subcommand: `--help` after it prints that target's own usage. */
function command(load: () => Promise<BenchTarget>): Subcommand {
  return async (args) => {
    const target = await load();
    if (wantsHelp(args)) console.log(`usage: bun run ${target.USAGE}`);
    else await target.main(args);
  };
}

async function usage(): Promise<string> {
  const lines = await Promise.all(Object.values(TARGETS).map(async (load) => `  ${(await load()).USAGE}`));
  return `usage: bun run bench <target> [flags]\n\n${lines.join('\n')}`;
}

await runSubcommands(
  Object.fromEntries(Object.entries(TARGETS).map(([name, load]) => [name, command(load)])),
  'usage: bun run bench <target> [flags]   (bun run bench help lists the targets)',
  { noun: 'target', help: usage },
);
