/**
 * `bun run bench <target> [flags]`: performance measurements. Each target is its own module exporting
 * `USAGE` and `main(args)`; add one by adding a line to TARGETS (modules load only when chosen).
 */
import { runCli, UsageError, wantsHelp } from '../cli-support.ts';

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
};

async function usage(): Promise<string> {
  const lines = await Promise.all(Object.values(TARGETS).map(async (load) => `  ${(await load()).USAGE}`));
  return `usage: bun run bench <target> [flags]\n\n${lines.join('\n')}`;
}

async function main(): Promise<void> {
  const [target, ...args] = process.argv.slice(2);
  if (target === undefined || target === 'help' || target === '--help') {
    console.log(await usage());
    return;
  }
  const load = TARGETS[target];
  if (!load) throw new UsageError(`unknown target ${target} (known: ${Object.keys(TARGETS).join(', ')})`);
  const chosen = await load();
  if (wantsHelp(args)) {
    console.log(`usage: bun run ${chosen.USAGE}`);
    return;
  }
  await chosen.main(args);
}

await runCli(main, 'usage: bun run bench <target> [flags]   (bun run bench help lists the targets)');
