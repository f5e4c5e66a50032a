/**
 * `bun run client -- "prompt" [flags]`: a small command-line client of the edge's gRPC Generate service
 * (grpcurl is not packaged here). Streams the text as it comes, cloud tokens in red on a terminal, then
 * the metrics. `--json` prints every event as one JSON line instead (the message's own fields, without
 * proto-loader's oneof markers). Without `--address` it dials the edge on this machine where the edge's
 * own settings put it (EDGE_GRPC_PORT and EDGE_HOST, read by the edge's config module), and a refused
 * connection says which address it tried and how to choose another. `--chat` is a multi-turn conversation
 * in the terminal instead (client-chat.ts): the edge renders each turn with its model's chat template.
 */
import * as grpc from '@grpc/grpc-js';
import { AppError } from '../shared/errors.ts';
import { fromGrpcError } from '../shared/grpc/errors.ts';
import { oneofMarkerStripper } from '../shared/grpc/plain-message.ts';
import { parseEdgeConfig } from '../edge/config.ts';
import { EdgeGeneratorClient, type GenerateEvent__Output, type GenerateRequest } from '../edge/grpc/edge-proto.ts';
import { integerFlag, numberFlag, parseFlags, runCli, UsageError } from './cli-support.ts';
import { chatInTerminal } from './client-chat.ts';

const USAGE = `usage: bun run client -- "prompt" | --chat [--system TEXT]  [--address host:port] [--mode joint|small_only|llm_only]
       [--threshold T] [--max-new-tokens N] [--temperature T] [--top-p P] [--seed S] [--route-span N] [--speculate on|off]
       [--route-share S] [--route-tokens-per-minute N] [--route-wait-ms MS] [--token BEARER] [--deadline-ms MS] [--json]
--address defaults to this machine's edge: 127.0.0.1 and EDGE_GRPC_PORT (50061 when unset), as the edge reads them.
--chat: a conversation, one line a turn (the edge applies its model's chat template); /reset starts over, /exit ends.`;

const RED = '\x1b[31m';
const YELLOW = '\x1b[33m';
const RESET = '\x1b[0m';

async function main(): Promise<void> {
  const { values, positionals } = parseFlags(process.argv.slice(2), {
    address: { type: 'string' },
    mode: { type: 'string' },
    threshold: { type: 'string' },
    'max-new-tokens': { type: 'string' },
    temperature: { type: 'string' },
    'top-p': { type: 'string' },
    seed: { type: 'string' },
    'route-span': { type: 'string' },
    'route-share': { type: 'string' },
    'route-tokens-per-minute': { type: 'string' },
    'route-wait-ms': { type: 'string' },
    speculate: { type: 'string' },
    token: { type: 'string' },
    'deadline-ms': { type: 'string', default: '120000' },
    json: { type: 'boolean' },
    chat: { type: 'boolean' },
    system: { type: 'string' },
  });
  if (values.chat ? positionals.length !== 0 : positionals.length !== 1)
    throw new UsageError(values.chat ? '--chat reads its turns from the terminal: give no prompt' : 'give exactly one prompt');
  if (values.system !== undefined && !values.chat) throw new UsageError('--system goes with --chat');
  if (values.speculate !== undefined && values.speculate !== 'on' && values.speculate !== 'off') {
    throw new UsageError(`--speculate must be on or off, got ${JSON.stringify(values.speculate)}`);
  }
  const request: GenerateRequest = {
    prompt: positionals[0] ?? '',
    mode: values.mode ?? '',
    threshold: numberFlag(values, 'threshold'),
    maxNewTokens: integerFlag(values, 'max-new-tokens'),
    temperature: numberFlag(values, 'temperature'),
    topP: numberFlag(values, 'top-p'),
    seed: integerFlag(values, 'seed'),
    routeSpan: integerFlag(values, 'route-span'),
    routeShare: numberFlag(values, 'route-share'),
    routeTokensPerMinute: integerFlag(values, 'route-tokens-per-minute'),
    routeWaitMs: integerFlag(values, 'route-wait-ms'),
    // Absent: the edge's own setting.
    speculate: values.speculate === undefined ? undefined : values.speculate === 'on',
  };
  const address = values.address ?? localEdgeAddress();
  const client = new EdgeGeneratorClient(address, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  if (values.token) metadata.set('authorization', `Bearer ${values.token}`);
  const deadlineMs = integerFlag(values, 'deadline-ms')!;
  const color = process.stdout.isTTY && !values.json;
  try {
    if (values.chat) {
      await chatInTerminal(
        (messages) => streamEvents(client.Generate({ ...request, prompt: '', messages }, metadata, { deadline: Date.now() + deadlineMs }), color, values.json),
        values.system,
      );
    } else {
      await streamEvents(client.Generate(request, metadata, { deadline: Date.now() + deadlineMs }), color, values.json);
    }
  } catch (e) {
    if (e instanceof AppError) throw e;
    const error = e as grpc.ServiceError;
    // Not reached at all (refused, unresolvable); an edge that answers UNAVAILABLE itself says why.
    if (error.code === grpc.status.UNAVAILABLE && /^No connection established|ECONNREFUSED|resolution failed/i.test(error.details)) {
      const from = values.address ? '--address' : 'EDGE_GRPC_PORT, or its default';
      const reason = error.details.replace(/^No connection established\. Last error: (Error: )?/, '').replace(/\.? *Resolution note: *$/, '');
      throw new AppError(
        'UNAVAILABLE',
        `no edge answered at ${address} (from ${from}): ${reason}; start one (bun run start) or give its address with --address host:port`,
      );
    }
    throw fromGrpcError(error);
  } finally {
    client.close();
  }
}

/** Prints one generation's events as they come (the text, cloud tokens tinted; or JSON lines); resolves its `done`. */
async function streamEvents(call: AsyncIterable<unknown>, color: boolean, json: boolean | undefined): Promise<NonNullable<GenerateEvent__Output['done']>> {
  const plain = json ? oneofMarkerStripper('edge_generator.proto') : undefined;
  let done: GenerateEvent__Output['done'];
  for await (const event of call as AsyncIterable<GenerateEvent__Output>) {
    if (event.done) done = event.done;
    if (plain) {
      console.log(JSON.stringify(plain(event)));
    } else if (event.token) {
      const { text, source } = event.token;
      const tint = source === 'llm' ? RED : source === 'fallback' ? YELLOW : '';
      process.stdout.write(color && tint ? `${tint}${text}${RESET}` : text);
    } else if (event.done) {
      const m = event.done.metrics!;
      process.stdout.write(
        `\n\n${m.tokens} tokens, ${m.routed} routed (${(m.routedRatio * 100).toFixed(1)}%), ${m.fallback} fallback · ` +
          `prompt ${m.promptTokens} tokens (${m.cachedTokens} cached) · ` +
          `TTFT ${m.ttftMs.toFixed(1)} ms · TBT ${m.tbtMeanMs.toFixed(2)} ms · cloud ${m.cloudMs.toFixed(1)} ms · ` +
          `total ${m.totalMs.toFixed(1)} ms · finished: ${event.done.finishReason}` +
          (m.budget && m.budget.policy !== 'threshold'
            ? ` · ${m.budget.policy}: cut ${m.budget.cut.toFixed(3)}, ${(m.budget.realizedShare * 100).toFixed(1)}% of positions routed`
            : '') +
          '\n',
      );
    } else if (event.error) {
      throw new AppError('INTERNAL', `${event.error.code}: ${event.error.message}`);
    }
  }
  if (!done) throw new AppError('INTERNAL', 'the stream ended without a final event');
  return done;
}

/** Where the edge on this machine serves gRPC, as its own settings say (EDGE_GRPC_PORT, EDGE_HOST). */
function localEdgeAddress(): string {
  const { host, grpcPort } = parseEdgeConfig([], process.env);
  if (grpcPort <= 0) throw new UsageError(`EDGE_GRPC_PORT is ${grpcPort < 0 ? 'off' : '0 (any free port)'}: give the edge's address with --address host:port`);
  const dialed = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `${dialed.includes(':') ? `[${dialed}]` : dialed}:${grpcPort}`;
}

await runCli(main, USAGE);
