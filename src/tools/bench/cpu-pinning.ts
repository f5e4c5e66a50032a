/**
 * Keeping the edge and the cloud off each other's cores when both run on one machine for a benchmark.
 * A cloud model on the edge's cores is a benchmark artefact: every step one side computes is a step the
 * other cannot, which no deployment with the cloud elsewhere has. Pinning each side to its own cores
 * (Linux CPU affinity, through util-linux's `taskset`) makes the one machine behave like two, up to the
 * memory bandwidth and last-level cache they still share.
 *
 * @example
 * pinThisProcess('0');                                   // before any onnxruntime session exists
 * const shim = await startPinnedShim({ cpus: '1', modelPack, threads: 1, log });
 * try { ... dial shim.address ... } finally { await shim.stop(); }
 */
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../shared/paths.ts';
import { SupervisedChild } from '../../supervised-child.ts';
import { AppError } from '../../shared/errors.ts';

/** taskset's CPU list syntax: "1", "0,2", "2-3", "0-1,4". */
const CPU_LIST = /^\d+(-\d+)?(,\d+(-\d+)?)*$/;

export function isCpuList(cpus: string): boolean {
  return CPU_LIST.test(cpus);
}

function taskset(args: string[]): void {
  const run = Bun.spawnSync(['taskset', ...args], { stdout: 'ignore', stderr: 'pipe' });
  if (run.exitCode !== 0)
    throw new AppError('FAILED_PRECONDITION', `taskset ${args.join(' ')} failed: ${run.stderr.toString().trim() || `exit code ${run.exitCode}`}`);
}

/**
 * Pins every thread of this process to `cpus`. Threads started later (onnxruntime's pool) inherit the
 * affinity of the thread that starts them, so call this before loading a model.
 */
export function pinThisProcess(cpus: string): void {
  taskset(['--all-tasks', '--cpu-list', '--pid', cpus, String(process.pid)]);
}

export interface PinnedShim {
  readonly address: string;
  stop(): Promise<void>;
}

/** The cloud shim (`src/cloud/main.ts`, embedded backend) as a separate process pinned to `cpus`. */
export async function startPinnedShim(o: {
  cpus: string;
  modelPack: string;
  threads?: number;
  /** The shim's --model-thread; its own default when absent. */
  modelThread?: string;
  /** The shim's --prefix-cache-mb; its own default when absent. */
  prefixCacheMb?: number;
  log: (line: string) => void;
}): Promise<PinnedShim> {
  const command = ['taskset', '--cpu-list', o.cpus, 'bun', join(PROJECT_ROOT, 'src/cloud/main.ts'), '--host', '127.0.0.1', '--port', '0'];
  command.push('--model-pack', o.modelPack, '--threads', String(o.threads ?? 0), '--log-level', 'error');
  if (o.prefixCacheMb !== undefined) command.push('--prefix-cache-mb', String(o.prefixCacheMb));
  if (o.modelThread !== undefined) command.push('--model-thread', o.modelThread);
  const child = new SupervisedChild({ name: `cloud shim (CPUs ${o.cpus})`, command, env: process.env }, o.log);
  const address = await Promise.race([
    child.firstReady,
    child.ended.then((end) => {
      throw new AppError('UNAVAILABLE', `the cloud shim on CPUs ${o.cpus} ${end.description} before it served`);
    }),
  ]);
  return { address, stop: () => child.stop() };
}
