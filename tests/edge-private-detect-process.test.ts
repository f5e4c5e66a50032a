/**
 * Detection that errs towards hiding, through `bun run edge --private-detect all` as a real process and a real
 * shim whose backend records the context of every step it computes: an address on a private-use domain or with
 * a one-letter or quoted local part or an IP literal, a full-width address, a number in an unallocated range,
 * with the 00 prefix or in Arabic-Indic digits, and an IBAN grouped with dashes or no-break spaces never reach
 * the cloud; their placeholders do, and look-alikes (a version, a date) go as they are.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { Backend } from '../src/cloud/backends/backend.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import type { ShimServer } from '../src/cloud/shim-server.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { TextTokenizer } from '../src/shared/text/tokenizer.ts';
import { cloudPackDir, startTestShim } from './helpers/cloud-fixture.ts';
import { collectOutput, exitWithin } from './helpers/process-output.ts';
import { readSse } from './helpers/sse-client.ts';

/** Each value the prompt holds, and the placeholder kind it must go as. */
const VALUES: readonly (readonly [value: string, kind: string])[] = [
  ['x@gmail.com', 'EMAIL'],
  ['jane@acme.internal', 'EMAIL'],
  ['ops@corp.local', 'EMAIL'],
  ['x@y.example', 'EMAIL'],
  ['"john doe"@example.com', 'EMAIL'],
  ['ann@[192.168.0.1]', 'EMAIL'],
  ['ｍａｒｙ＠ｃｌｉｎｉｃ．ｌａｎ', 'EMAIL'],
  ['+44 7648 198702', 'PHONE'],
  ['0044 20 7946 0958', 'PHONE'],
  ['+٤٤ ٢٠ ٧٩٤٦ ٠٩٥٨', 'PHONE'],
  ['DE89-3704-0044-0532-0130-00', 'IBAN'],
  ['GB82\u00a0WEST\u00a01234\u00a05698\u00a07654\u00a032', 'IBAN'],
];
/** Parts of the values that would show a leak however the rest was cut. */
const TELLTALES = ['gmail', 'acme', 'corp.local', 'y.example', 'john doe', '192.168', 'ｍａｒｙ', 'clinic', '7648', '198702', '7946', '٧٩٤٦', '3704', 'WEST'];
const LOOK_ALIKES = ['version 1.2.0.4', '2024-05-17'];

let shim: ShimServer;
let tokenizer: TextTokenizer;
const contexts: number[][] = [];

/** The embedded backend, keeping the context of each step: what the cloud received. */
function recordingBackend(inner: Backend): Backend {
  return {
    info: inner.info,
    openSequence(id) {
      const sequence = inner.openSequence(id);
      return {
        step: (request) => (contexts.push([...request.context]), sequence.step(request)),
        dispose: () => sequence.dispose(),
      };
    },
    close: () => inner.close(),
  };
}

beforeAll(async () => {
  const pack = await cloudPackDir();
  tokenizer = await TextTokenizer.fromPack(pack);
  shim = await startTestShim({}, { backend: recordingBackend(await EmbeddedBackend.load({ modelPack: pack, maxLiveSequences: 4 })) });
});

afterAll(async () => {
  await shim?.shutdown(1000);
});

test('--private-detect all: the values a validator would miss reach the cloud only as placeholders', async () => {
  const edge = Bun.spawn(
    [
      'bun',
      'src/edge/main.ts',
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--grpc-port',
      'off',
      '--cloud',
      shim.address,
      '--private-detect',
      'all',
      '--log-level',
      'info',
    ],
    { cwd: PROJECT_ROOT, stdout: 'ignore', stderr: 'pipe' },
  );
  const stderr = collectOutput(edge.stderr);
  try {
    const ready = JSON.parse(await stderr.waitForLine((l) => l.includes('"edge ready"'), 60_000, 'the edge to start')) as { url: string };
    const prompt = `Notes for ${VALUES.map(([value]) => value).join(', ')}; ${LOOK_ALIKES.join(', ')}. Once upon a time`;
    const body = JSON.stringify({ prompt, mode: 'llm_only', max_new_tokens: 4 });
    const stream = readSse(
      await fetch(`${ready.url.replace(/\/$/, '')}/api/generate`, { method: 'POST', body, headers: { 'content-type': 'application/json' } }),
    );
    expect(await stream.ended).toBe(true);
    const done = stream.events.find((e) => e.event === 'done');
    expect(done).toBeDefined();

    const received = contexts.map((ids) => tokenizer.decode(ids));
    expect(received.length).toBeGreaterThan(0);
    for (const text of received) {
      for (const [value] of VALUES) expect(text).not.toContain(value);
      for (const telltale of TELLTALES) expect(text).not.toContain(telltale);
      for (const lookAlike of LOOK_ALIKES) expect(text).toContain(lookAlike);
    }
    const counts = new Map<string, number>();
    for (const [, kind] of VALUES) counts.set(kind, (counts.get(kind) ?? 0) + 1);
    for (const [kind, count] of counts) for (let n = 1; n <= count; n++) expect(received[0]).toContain(`[${kind}_${n}]`);
    expect(JSON.parse(done!.data).metrics.cloud.placeholders).toBe(VALUES.length);
  } finally {
    edge.kill('SIGTERM');
    await exitWithin(edge, 20_000);
  }
});
