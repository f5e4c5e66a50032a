/**
 * `bun run start` from the project root, as the README says, on free ports (SHIM_PORT, EDGE_PORT,
 * EDGE_GRPC_PORT, EDGE_HOST: the launcher adds no flags that would override them). The README command
 * serves the chat pair: a chat turn through /v1/chat/completions is answered with a reply the model
 * ends itself, with tokens from the shim, the page links its Chat, and plain prompts still generate. With
 * `--pair stories` (the rest of the tests): the page is served,
 * a joint generation gets tokens from the shim's embedded model across real processes, and a SIGTERM
 * (to the launcher alone, or to the whole process group as systemd and a terminal's Ctrl-C do, which
 * signals every child twice) stops both children gracefully with exit code 0, also when it comes during
 * start-up. A Ctrl-C (SIGINT to the process group) logs one plain stop per child, and the page's URL is
 * printed once. A shim killed mid-generation costs fallback tokens, not the page: the launcher restarts
 * it and routing resumes. The first start's router training says how long it takes and shows its progress,
 * as plain lines where the output is not a terminal.
 */
import { expect, test } from 'bun:test';
import { lineProgress, progressFor } from '../src/tools/lab/progress.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { collectOutput, exitWithin, jsonLines, type ProcessOutput } from './helpers/process-output.ts';
import { readSse } from './helpers/sse-client.ts';
import { freePort } from './helpers/shim-process.ts';

interface RunningSystem {
  launcher: ReturnType<typeof Bun.spawn>;
  stdout: ProcessOutput;
  stderr: ProcessOutput;
  url: string;
  ports: { shim: number; edge: number; grpc: number };
}

/**
 * Starts `bun run start` in its own process group (so a failed test can end it and both children at once):
 * the story pair unless `args` say otherwise (these tests' prompts and lengths are the story pair's).
 */
async function spawnLauncher(args: string[] = ['--pair', 'stories']): Promise<Omit<RunningSystem, 'url'>> {
  const ports = { shim: await freePort(), edge: await freePort(), grpc: await freePort() };
  const launcher = Bun.spawn(['bun', 'run', 'start', ...args], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, SHIM_PORT: String(ports.shim), EDGE_PORT: String(ports.edge), EDGE_GRPC_PORT: String(ports.grpc), EDGE_HOST: '127.0.0.1' },
    stdout: 'pipe',
    stderr: 'pipe',
    detached: true,
  });
  return { launcher, stdout: collectOutput(launcher.stdout), stderr: collectOutput(launcher.stderr), ports };
}

/** Starts `bun run start` and waits (bounded) for its "is up" line. */
async function startSystem(args?: string[]): Promise<RunningSystem> {
  const { launcher, stdout, stderr, ports } = await spawnLauncher(args);
  try {
    const up = await stdout.waitForLine((l) => l.startsWith('Edge token router is up: '), 90_000, 'the "is up" line');
    const url = up.match(/is up: (\S+)/)![1]!;
    return { launcher, stdout, stderr, url, ports };
  } catch (e) {
    stopGroup(launcher);
    throw new Error(`${e instanceof Error ? e.message : String(e)}\nstderr:\n${stderr.text()}`);
  }
}

function stopGroup(launcher: RunningSystem['launcher']): void {
  try {
    process.kill(-launcher.pid, 'SIGKILL');
  } catch {
    // the group is already gone
  }
}

/** Both children stopped through their graceful path: exit code 0 and their final log lines. */
async function expectGracefulStop(system: RunningSystem): Promise<void> {
  expect(await exitWithin(system.launcher, 30_000)).toBe(0);
  await Promise.all([system.stdout.closed, system.stderr.closed]);
  expect(system.stdout.lines()).toContain('cloud shim exited with code 0');
  expect(system.stdout.lines()).toContain('edge exited with code 0');
  const logs = jsonLines(system.stderr);
  expect(logs.find((l) => l.component === 'shim' && l.msg === 'shim stopped')).toMatchObject({ forced: false });
  expect(logs.find((l) => l.component === 'edge' && l.msg === 'edge stopped')).toMatchObject({ drained: true });
  expect(logs.some((l) => l.msg === 'forced exit before the shutdown finished')).toBe(false);
}

test("--pair stories serves the page and routes tokens to the story pair's shim; SIGTERM stops both children gracefully", async () => {
  const system = await startSystem();
  try {
    expect(system.url).toBe(`http://127.0.0.1:${system.ports.edge}/`);
    expect(system.stdout.text()).toContain(`(edge gRPC on :${system.ports.grpc}, cloud shim on 127.0.0.1:${system.ports.shim})`);
    // Printed once, by the launcher: the edge under it leaves its own "edge page:" line out (its log keeps the field).
    const printed = [...system.stdout.lines(), ...system.stderr.lines()].filter((l) => l.includes(system.url) && !l.startsWith('{'));
    expect(printed).toEqual([`Edge token router is up: ${system.url}  (edge gRPC on :${system.ports.grpc}, cloud shim on 127.0.0.1:${system.ports.shim})`]);
    // The edge may be ready before the shim has loaded its model: wait for the shim's line too.
    const listening = JSON.parse(await system.stderr.waitForLine((l) => l.includes('"shim listening"'), 30_000, 'the shim'));
    expect(listening).toMatchObject({ address: `127.0.0.1:${system.ports.shim}`, backend: 'embedded:stories260k' });
    expect(jsonLines(system.stderr).find((l) => l.msg === 'edge ready')).toMatchObject({ cloud: `127.0.0.1:${system.ports.shim}` });

    const page = await fetch(system.url);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<form class="controls" hx-post="/runs"');
    expect(html).toContain('<textarea id="prompt" name="prompt"');

    const body = JSON.stringify({ prompt: 'Once upon a time', mode: 'joint', threshold: 0.9, max_new_tokens: 24 });
    const stream = readSse(await fetch(`${system.url}api/generate`, { method: 'POST', body, headers: { 'content-type': 'application/json' } }));
    expect(await stream.ended).toBe(true);
    const tokens = stream.events.filter((e) => e.event === 'token').map((e) => JSON.parse(e.data) as { source: string });
    expect(tokens).toHaveLength(24);
    const routed = tokens.filter((t) => t.source === 'llm').length;
    expect(routed).toBeGreaterThan(0);
    expect(tokens.filter((t) => t.source === 'fallback')).toHaveLength(0);
    const done = JSON.parse(stream.events.at(-1)!.data) as { type: string; finish_reason: string; metrics: { routed: number; fallback: number } };
    expect(done).toMatchObject({ type: 'done', finish_reason: 'length', metrics: { routed, fallback: 0 } });

    system.launcher.kill('SIGTERM');
    await expectGracefulStop(system);
  } finally {
    stopGroup(system.launcher);
  }
}, 150_000);

test('the README command serves the chat pair: a chat turn over /v1/chat/completions, the Chat page linked from Generate, plain prompts still generate', async () => {
  const system = await startSystem([]);
  try {
    const listening = JSON.parse(await system.stderr.waitForLine((l) => l.includes('"shim listening"'), 30_000, 'the shim'));
    expect(listening).toMatchObject({ backend: 'embedded:stories260k-chat' });
    expect(jsonLines(system.stderr).find((l) => l.msg === 'edge ready')).toMatchObject({ router: 'onnx:router-stories260k-chat-distilled-1l' });

    const models = (await (await fetch(`${system.url}v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(['stories260k-chat-distilled-1l']);
    const body = {
      model: 'stories260k-chat-distilled-1l',
      messages: [{ role: 'user', content: 'Tell me a story about a dog.' }],
      max_tokens: 300,
      temperature: 0,
    };
    const reply = await fetch(`${system.url}v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    });
    expect(reply.status).toBe(200);
    const completion = (await reply.json()) as {
      choices: { message: { content: string }; finish_reason: string }[];
      usage: { completion_tokens: number; routed_tokens: number; fallback_tokens: number };
    };
    // The chat-tuned pair ends its story itself (</s>), well before the cap, with some tokens from the cloud.
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(completion.usage.completion_tokens).toBeLessThan(300);
    expect(completion.choices[0]!.message.content).toContain('.');
    expect(completion.usage.routed_tokens).toBeGreaterThan(0);
    expect(completion.usage.fallback_tokens).toBe(0);

    const page = await (await fetch(system.url)).text();
    expect(page).toContain('<a href="/chat">Chat</a>');
    expect((await fetch(`${system.url}chat`)).status).toBe(200);
    const generate = JSON.stringify({ prompt: 'Once upon a time', mode: 'joint', max_new_tokens: 16 });
    const stream = readSse(await fetch(`${system.url}api/generate`, { method: 'POST', body: generate, headers: { 'content-type': 'application/json' } }));
    expect(await stream.ended).toBe(true);
    expect(stream.events.filter((e) => e.event === 'token').length).toBeGreaterThan(0);

    system.launcher.kill('SIGTERM');
    await expectGracefulStop(system);
  } finally {
    stopGroup(system.launcher);
  }
}, 150_000);

test('--pair takes chat or stories; anything else stops before building or starting anything', () => {
  const run = Bun.spawnSync(['bun', 'run', 'start', '--pair', 'qwen'], { cwd: PROJECT_ROOT, stdout: 'pipe', stderr: 'pipe' });
  expect(run.exitCode).toBe(1);
  expect(run.stderr.toString()).toContain('error: --pair must be chat or stories, got "qwen"');
  expect(run.stdout.toString()).not.toContain('up to date');
});

test('a SIGTERM to the whole process group (each child signalled twice) still stops both gracefully', async () => {
  const system = await startSystem();
  try {
    // systemd's stop signals every process of the unit's control group (a terminal's Ctrl-C does the same
    // with SIGINT): each child gets that SIGTERM and the launcher's own.
    process.kill(-system.launcher.pid, 'SIGTERM');
    // Whether a child's second signal lands during its shutdown or after it exited is a race; either
    // way it must not turn the graceful stop into a kill.
    await expectGracefulStop(system);
  } finally {
    stopGroup(system.launcher);
  }
}, 150_000);

test("a Ctrl-C (SIGINT to the process group, which `bun run` forwards to the launcher again) is one stop request: each child logs one plain 'stopping'", async () => {
  const system = await startSystem();
  try {
    await system.stderr.waitForLine((l) => l.includes('"shim listening"'), 30_000, 'the shim');
    process.kill(-system.launcher.pid, 'SIGINT');
    await expectGracefulStop(system);
    const logs = jsonLines(system.stderr);
    for (const component of ['shim', 'edge']) {
      const stops = logs.filter(
        (l) =>
          l.component === component &&
          ['stopping', 'already shutting down; another signal forces the exit', 'signal received; shutting down'].includes(l.msg as string),
      );
      expect(stops).toEqual([expect.objectContaining({ msg: 'stopping', signal: 'SIGINT', from: 'launcher' })]);
    }
  } finally {
    stopGroup(system.launcher);
  }
}, 150_000);

test("the first start's progress: on a non-terminal, a line as each phase starts and then at most one per interval", () => {
  let now = 0;
  const lines: string[] = [];
  const progress = lineProgress((line) => lines.push(line), { intervalMs: 5_000, now: () => now });
  now = 1_000;
  progress.start('teacher forcing', 400);
  for (const [at, value] of [
    [2_000, 10],
    [5_900, 100],
    [6_000, 120],
    [9_000, 200],
    [11_400, 300],
  ] as const) {
    now = at;
    progress.update(value);
  }
  progress.stop();
  now = 12_000;
  progress.start('training', 30);
  progress.update(3, 'val loss 0.3702');
  now = 17_000;
  progress.update(9, 'val loss 0.3650');
  expect(lines).toEqual([
    '[1 s] teacher forcing: 0/400 (0%)',
    '[6 s] teacher forcing: 120/400 (30%)',
    '[11 s] teacher forcing: 300/400 (75%)',
    '[12 s] training: 0/30 (0%)',
    '[17 s] training: 9/30 (30%) val loss 0.3650',
  ]);
  // What `models demo` (the first start's builder) uses: a bar on a terminal, these lines on anything else.
  const written: string[] = [];
  const pipe = { isTTY: false, write: (text: string) => written.push(text) } as unknown as NodeJS.WriteStream;
  progressFor(pipe).start('training', 30);
  expect(written).toEqual(['[0 s] training: 0/30 (0%)\n']);
});

/** The pid the launcher printed for its latest start of `name`. */
function childPid(system: RunningSystem, name: string): number {
  const line = system.stdout.lines().findLast((l) => l.startsWith(`started ${name} (pid `));
  return Number(line?.match(/pid (\d+)/)?.[1]);
}

test('a SIGTERM to the process group at any moment of start-up stops everything cleanly (exit 0)', async () => {
  // From the pack builder's first line: while it checks the packs, as the children start, while they load.
  for (const delayMs of [0, 150, 400, 700]) {
    const system = await spawnLauncher();
    try {
      await system.stdout.waitForLine((l) => l.includes('up to date') || l.includes('building'), 60_000, "the pack builder's first line");
      await Bun.sleep(delayMs);
      process.kill(-system.launcher.pid, 'SIGTERM');
      const code = await exitWithin(system.launcher, 30_000);
      await Promise.all([system.stdout.closed, system.stderr.closed]);
      expect({ delayMs, code, output: code === 0 ? '' : system.stdout.text() + system.stderr.text() }).toEqual({ delayMs, code: 0, output: '' });
      expect(system.stderr.text()).not.toContain('killing them');
      expect(jsonLines(system.stderr).filter((l) => l.level === 'error')).toEqual([]);
      // Each child that was started ended through its own graceful path (or, signalled in the milliseconds
      // before its handlers exist, of the stop signal itself), or never started at all.
      for (const name of ['cloud shim', 'edge']) {
        const end = system.stdout.lines().find((l) => l.startsWith(`${name} exited`));
        if (system.stdout.text().includes(`started ${name}`)) expect(end).toMatch(new RegExp(`^${name} exited with (code 0|signal SIGTERM)$`));
        else expect(system.stdout.text()).toContain('stopped before the servers started');
      }
    } finally {
      stopGroup(system.launcher);
    }
  }
}, 150_000);

test('a shim killed mid-generation: the generation finishes on fallback tokens, the page answers, the launcher restarts the shim and routing resumes', async () => {
  const system = await startSystem();
  try {
    await system.stderr.waitForLine((l) => l.includes('"shim listening"'), 30_000, 'the shim');
    const firstShim = childPid(system, 'cloud shim');
    // llm_only: every token goes to the shim until it dies; from then on the edge decides them (fallback).
    const body = JSON.stringify({ prompt: 'Once upon a time', mode: 'llm_only', max_new_tokens: 400 });
    const stream = readSse(await fetch(`${system.url}api/generate`, { method: 'POST', body, headers: { 'content-type': 'application/json' } }));
    await stream.waitFor((events) => events.some((e) => e.event === 'token'), 30_000, 'the first token');
    process.kill(firstShim, 'SIGKILL');
    expect(await stream.ended).toBe(true);
    const tokens = stream.events.filter((e) => e.event === 'token').map((e) => JSON.parse(e.data) as { source: string });
    expect(tokens.some((t) => t.source === 'llm')).toBe(true);
    expect(tokens.some((t) => t.source === 'fallback')).toBe(true);
    expect(JSON.parse(stream.events.at(-1)!.data)).toMatchObject({ type: 'done' });
    expect((await fetch(system.url)).status).toBe(200);

    await system.stdout.waitForLine((l) => l === 'cloud shim is serving again (pid ' + childPid(system, 'cloud shim') + ')', 30_000, 'the restarted shim');
    expect(system.stdout.text()).toContain('cloud shim exited with signal SIGKILL; restarting in 250 ms');
    expect(childPid(system, 'cloud shim')).not.toBe(firstShim);
    // The edge's circuit lets a probe through on its backoff schedule; then routed tokens come from the shim again.
    let routedAgain = false;
    for (const until = performance.now() + 30_000; !routedAgain && performance.now() < until; await Bun.sleep(200)) {
      const again = readSse(
        await fetch(`${system.url}api/generate`, {
          method: 'POST',
          body: JSON.stringify({ prompt: 'Once upon a time', mode: 'llm_only', max_new_tokens: 8 }),
          headers: { 'content-type': 'application/json' },
        }),
      );
      await again.ended;
      routedAgain = again.events.some((e) => e.event === 'token' && JSON.parse(e.data).source === 'llm');
    }
    expect(routedAgain).toBe(true);

    system.launcher.kill('SIGTERM');
    await expectGracefulStop(system);
  } finally {
    stopGroup(system.launcher);
  }
}, 150_000);
