/**
 * The Score flood of `bench score-flood`, in a process of its own as a tool's teacher forcing would be:
 * `callers` loops, each sending Score calls of full windows of real text (the TinyStories excerpt) to the
 * shim at `address` back to back, from its ready message until it is told to stop.
 *
 * Protocol (JSON over Bun's IPC channel, ipc-child.ts): the child sends `{type: 'ready'}` once it floods (or
 * `{type: 'failed', message}` and exits); `{type: 'stop'}` ends the loops after their calls in flight and is
 * answered with `{type: 'stopped', ...FloodCount}`, after which the child exits. It also exits when its
 * parent goes away.
 *
 * Started by score-flood.ts as `bun score-flood-child.ts '<json of FloodOptions>'`.
 */
import * as grpc from '@grpc/grpc-js';
import { errorMessage } from '../../shared/errors.ts';
import { CloudRouterClient } from '../../shared/grpc/proto.ts';
import { loadModelPack } from '../../shared/model/model-pack.ts';
import { loadCorpus } from './load-workers.ts';

export interface FloodOptions {
  address: string;
  callers: number;
  /** The cloud pack: its tokenizer makes the text's ids, its window the length of each call. */
  pack: string;
  topK: number;
}

/** Score calls the flood completed, the positions they scored, and the calls that failed (a few messages). */
export interface FloodCount {
  calls: number;
  positions: number;
  errors: number;
  messages: string[];
}

export type FloodReply = { type: 'ready' } | { type: 'failed'; message: string } | ({ type: 'stopped' } & FloodCount);

/** Each call's deadline: a flood call waits behind the routed steps, and a slow one is still not a failure. */
const SCORE_DEADLINE_MS = 120_000;

async function flood(): Promise<void> {
  const send = (reply: FloodReply) => process.send!(reply);
  const options = JSON.parse(process.argv[2] ?? '{}') as FloodOptions;
  let windows: number[][];
  try {
    const corpus = await loadCorpus(options.pack);
    const length = loadModelPack(options.pack).maxPositions;
    windows = Array.from({ length: 8 }, (_, w) => [corpus.bos, ...corpus.ids.slice(w * length, (w + 1) * length - 1)]);
  } catch (e) {
    send({ type: 'failed', message: errorMessage(e) });
    process.exit(1);
  }
  const client = new CloudRouterClient(options.address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1 });
  const count: FloodCount = { calls: 0, positions: 0, errors: 0, messages: [] };
  let flooding = true;
  const score = (ids: number[], requestId: string) =>
    new Promise<number>((resolve, reject) =>
      client.Score({ ids, topK: options.topK, requestId }, { deadline: Date.now() + SCORE_DEADLINE_MS }, (error, reply) =>
        error ? reject(error) : resolve(reply!.positions.length),
      ),
    );
  const caller = async (index: number) => {
    for (let call = 0; flooding; call++) {
      try {
        const positions = await score(windows[(index + call) % windows.length]!, `flood-${index}-${call}`);
        count.positions += positions;
        count.calls++;
      } catch (e) {
        count.errors++;
        if (count.messages.length < 5) count.messages.push(errorMessage(e));
      }
    }
  };
  const callers = Array.from({ length: options.callers }, (_, i) => caller(i));
  const stop = async () => {
    if (!flooding) return;
    flooding = false;
    await Promise.all(callers);
    client.close();
    if (process.connected) send({ type: 'stopped', ...count });
    process.exit(0);
  };
  process.on('message', (message: { type: string }) => {
    if (message.type === 'stop') void stop();
  });
  process.on('disconnect', () => void stop());
  send({ type: 'ready' });
}

if (import.meta.main) await flood();
