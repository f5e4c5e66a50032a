/**
 * Our side of `bench decode --peer`: a child process holding one pack's DecodeSession (loaded and
 * prefilled) between the rounds its parent alternates with llama.cpp's, spoken to over line-process.ts's
 * protocol. Started as `bun decode-round-child.ts '{"dir", "threads", "promptTokens", "plannedSteps",
 * "bandwidthGbS", "kernelFloor"}'`; prints `{"type":"ready","prefill_ms","load_ms"}`, then answers one line per request:
 * `{"type":"warmup","steps":N}` → `{"type":"warmup"}`, `{"type":"round","steps":N}` →
 * `{"type":"round","stepsMs":[...]}`, `{"type":"finish"}` → `{"type":"finish","result":{...}}` (what
 * `bench decode --json` prints for the pack). Exits when its stdin closes.
 *
 * @example
 * const { helper } = await LineProcess.start({ command: [process.execPath, DECODE_ROUND_CHILD, JSON.stringify(options)], name: 'our q4 decode', log });
 */
import { createInterface } from 'node:readline';
import { AppError, errorMessage } from '../../shared/errors.ts';
import { decodeBenchJson } from './decode-report.ts';
import { DecodeSession, type DecodeSessionOptions } from './decode-session.ts';

export const DECODE_ROUND_CHILD = import.meta.path;

type ChildOptions = Pick<DecodeSessionOptions, 'dir' | 'threads' | 'promptTokens' | 'plannedSteps' | 'bandwidthGbS' | 'kernelFloor'>;

function say(message: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function stepCount(request: { steps?: unknown }): number {
  const steps = request.steps;
  if (typeof steps !== 'number' || !Number.isInteger(steps) || steps < 1)
    throw new AppError('INVALID_ARGUMENT', `"steps" must be a whole number ≥ 1, got ${JSON.stringify(steps)}`);
  return steps;
}

async function answer(session: DecodeSession, line: string): Promise<Record<string, unknown>> {
  let request: { type?: unknown; steps?: unknown };
  try {
    request = JSON.parse(line) as typeof request;
  } catch {
    throw new AppError('INVALID_ARGUMENT', `not a JSON request: ${line.slice(0, 80)}`);
  }
  if (request.type === 'warmup') {
    await session.warmUp(stepCount(request));
    return { type: 'warmup' };
  }
  if (request.type === 'round') return { type: 'round', stepsMs: await session.runRound(stepCount(request)) };
  if (request.type === 'finish') return { type: 'finish', result: decodeBenchJson(session.result()) };
  throw new AppError('INVALID_ARGUMENT', `unknown request ${JSON.stringify(request.type)} (known: warmup, round, finish)`);
}

if (import.meta.main) {
  const log = (line: string) => console.error(line);
  let session: DecodeSession | undefined;
  try {
    const options = JSON.parse(process.argv[2] ?? '') as ChildOptions;
    // The parent measures the bandwidth before any model is loaded; the child makes no copy buffers.
    if (!(typeof options.bandwidthGbS === 'number' && options.bandwidthGbS > 0)) throw new AppError('INVALID_ARGUMENT', 'bandwidthGbS (GB/s, > 0) is required');
    session = await DecodeSession.open({ ...options, target: 'pack', copyBytes: 0, log });
    say({ type: 'ready', prefill_ms: session.prefillMs, load_ms: session.loadMs });
    for await (const line of createInterface({ input: process.stdin })) {
      if (!line.trim()) continue;
      // A bad request is answered with `failed` and the session stays, so the parent decides what follows.
      say(await answer(session, line).catch((e: unknown) => ({ type: 'failed', message: errorMessage(e) })));
    }
  } catch (e) {
    say({ type: 'failed', message: errorMessage(e) });
    process.exitCode = 1;
  } finally {
    await session?.close();
  }
}
