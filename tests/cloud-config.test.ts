/** The shim's configuration: sources, precedence, validation, immutability. */
import { afterAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_SHIM_CONFIG, HTTP_BACKEND_INFLIGHT_STEPS, maxInflightStepsFor, parseShimConfig, SHIM_USAGE } from '../src/cloud/config.ts';
import { createBackend } from '../src/cloud/backends/create-backend.ts';
import type { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import { DEMO, PROJECT_ROOT } from '../src/shared/paths.ts';
import { ensureDemoPacks } from './helpers/demo-packs.ts';

const dir = mkdtempSync(join(tmpdir(), 'shim-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(content: unknown): string {
  const path = join(dir, `${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

describe('shim config', () => {
  test('defaults: embedded backend with the demo cloud pack, frozen', () => {
    const config = parseShimConfig([], {});
    expect(config).toMatchObject({ ...DEFAULT_SHIM_CONFIG, modelPack: DEMO.cloudPack });
    expect(Object.isFrozen(config)).toBe(true);
  });

  test('file < environment < flags', () => {
    const path = file({ port: 1111, maxSessions: 3, backend: 'sglang', backendUrl: 'http://file:30000' });
    const env = { SHIM_CONFIG: path, SHIM_PORT: '2222', SHIM_BACKEND_URL: 'http://env:30000', SHIM_BACKEND_STREAM: 'true' };
    const config = parseShimConfig(['--port', '3333', '--max-context-tokens', '5000'], env);
    expect(config).toMatchObject({
      port: 3333,
      maxSessions: 3,
      backend: 'sglang',
      backendUrl: 'http://env:30000',
      backendStream: true,
      maxContextTokens: 5000,
      modelPack: undefined,
    });
    expect(parseShimConfig(['--config', path], {}).port).toBe(1111);
  });

  test('boolean flags, TLS files and the auth token', () => {
    const config = parseShimConfig(['--backend-stream', '--tls-cert', 'c.pem', '--tls-key', 'k.pem', '--tls-client-ca', 'ca.pem'], { SHIM_AUTH_TOKEN: 'tok' });
    expect(config).toMatchObject({ backendStream: true, tlsCert: 'c.pem', tlsKey: 'k.pem', tlsClientCa: 'ca.pem', authToken: 'tok' });
  });

  test('invalid input is an INVALID_ARGUMENT naming its source', () => {
    const cases: [string[], Record<string, string>, RegExp][] = [
      [['--port', 'abc'], {}, /--port: port must be an integer/],
      [[], { SHIM_MAX_SESSIONS: '0' }, /SHIM_MAX_SESSIONS: maxSessions must be an integer ≥ 1/],
      [['--backend', 'vllm'], {}, /backend must be one of embedded, sglang, openai/],
      [['--backend', 'sglang'], {}, /needs --backend-url/],
      [['--backend', 'openai', '--backend-url', 'ftp://x'], {}, /must be http/],
      [['--tls-cert', 'c.pem'], {}, /both --tls-cert and --tls-key/],
      [['--tls-client-ca', 'ca.pem'], {}, /needs --tls-cert/],
      [['--no-such-flag'], {}, /Unknown option/],
      [['--max-inflight-steps=-1'], {}, /--max-inflight-steps: maxInflightSteps must be an integer ≥ 0/],
      [['--max-inflight-steps', 'many'], {}, /--max-inflight-steps: maxInflightSteps must be an integer/],
      [['--batch-append-tokens', '0'], {}, /--batch-append-tokens: batchAppendTokens must be an integer ≥ 1/],
      [['--model-thread', 'gpu'], {}, /--model-thread: modelThread must be one of worker, main/],
      [[], { SHIM_MODEL_THREAD: 'both' }, /SHIM_MODEL_THREAD: modelThread must be one of worker, main/],
      [[], { SHIM_MAX_INFLIGHT_STEPS: '2.5' }, /SHIM_MAX_INFLIGHT_STEPS: maxInflightSteps must be an integer/],
      [[], { SHIM_CONFIG: join(dir, 'missing.json') }, /config file .*missing.json/],
    ];
    for (const [argv, env, message] of cases) {
      let error: unknown;
      try {
        parseShimConfig(argv, env);
      } catch (e) {
        error = e;
      }
      expect(error).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect((error as Error).message).toMatch(message);
    }
    expect(() => parseShimConfig(['--config', file({ bogus: 1 })], {})).toThrow(/unknown key "bogus"/);
    expect(() => parseShimConfig(['--config', file('not json')], {})).toThrow(/config file/);
  });

  test('--max-inflight-steps: as given, else one forward pass of the embedded batcher, else the HTTP default', () => {
    expect(maxInflightStepsFor(parseShimConfig(['--max-inflight-steps', '3'], {}))).toBe(3);
    expect(maxInflightStepsFor(parseShimConfig(['--max-batch', '16'], {}))).toBe(16);
    expect(maxInflightStepsFor(parseShimConfig([], {}))).toBe(DEFAULT_SHIM_CONFIG.maxBatch);
    expect(maxInflightStepsFor(parseShimConfig(['--backend', 'sglang', '--backend-url', 'http://sglang:30000'], {}))).toBe(HTTP_BACKEND_INFLIGHT_STEPS);
    expect(SHIM_USAGE).toContain('--max-inflight-steps');
  });

  test('usage lists every flag with its environment spelling rule', () => {
    expect(SHIM_USAGE).toContain('--backend-url');
    expect(SHIM_USAGE).toContain('SHIM_<NAME>');
    expect(SHIM_USAGE).toContain('--max-live-sequences');
    expect(SHIM_USAGE).toContain('--model-thread worker|main');
    expect(DEFAULT_SHIM_CONFIG.modelThread).toBe('worker');
    expect(parseShimConfig(['--model-thread', 'main'], {}).modelThread).toBe('main');
  });

  test('usage names the default --model-pack, the one an embedded shim starts with', () => {
    expect(SHIM_USAGE).toContain(
      '--model-pack VALUE\n      model pack folder (embedded model; tokenizer for reply text) (default models/stories260k, the demo cloud pack, with --backend embedded; none with sglang or openai)',
    );
    expect(parseShimConfig([], {}).modelPack).toBe(join(PROJECT_ROOT, 'models/stories260k'));
    expect(parseShimConfig(['--backend', 'openai', '--backend-url', 'http://openai:8000'], {}).modelPack).toBeUndefined();
    // The README's table of shim settings says the same.
    const row = readFileSync('README.md', 'utf8')
      .split('\n')
      .find((line) => line.startsWith('| `--model-pack`'));
    expect(row).toContain('`models/stories260k` (the demo cloud pack) with `embedded`, none with `sglang` / `openai`');
  });

  test("--max-batch and --batch-append-tokens reach the embedded backend's batcher (the demo cloud pack is the plain layout)", async () => {
    await ensureDemoPacks();
    for (const [argv, appendTokens] of [
      [[], DEFAULT_SHIM_CONFIG.batchAppendTokens],
      [['--batch-append-tokens', '5'], 5],
      [['--batch-append-tokens', '1'], 1],
    ] as const) {
      const backend = (await createBackend(parseShimConfig([...argv, '--max-batch', '4'], {}), undefined)) as EmbeddedBackend;
      try {
        expect(backend.scheduler?.maxBatch).toBe(4);
        expect(backend.scheduler?.appendTokens).toBe(appendTokens);
      } finally {
        await backend.close();
      }
    }
  }, 120_000);
});
