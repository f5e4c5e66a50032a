import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_EDGE_CONFIG, EDGE_USAGE, parseEdgeConfig, routeBudgetOf } from '../src/edge/config.ts';

const dir = mkdtempSync(join(tmpdir(), 'edge-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('defaults: the demo packs, the local shim, the LAN page', () => {
  expect(parseEdgeConfig([], {})).toEqual({ ...DEFAULT_EDGE_CONFIG });
  expect(Object.isFrozen(parseEdgeConfig([], {}))).toBe(true);
});

test('flags beat EDGE_* variables, which beat the config file', () => {
  const file = join(dir, 'edge.json');
  writeFileSync(file, JSON.stringify({ port: 7000, grpcPort: 7001, logLevel: 'warn', sendHiddenState: true }));
  const config = parseEdgeConfig(['--config', file, '--port', '9000'], { EDGE_PORT: '8000', EDGE_GRPC_PORT: '8001', EDGE_CLOUD: 'none' });
  expect([config.port, config.grpcPort, config.logLevel, config.sendHiddenState, config.cloud]).toEqual([9000, 8001, 'warn', true, undefined]);
  expect(parseEdgeConfig([], { EDGE_CONFIG: file }).port).toBe(7000);
  expect(parseEdgeConfig(['--router', 'builtin'], {}).router).toBeUndefined();
});

test('the gRPC service is turned off with the word off, from any source', () => {
  const file = join(dir, 'no-grpc.json');
  writeFileSync(file, JSON.stringify({ grpcPort: 'off' }));
  expect(parseEdgeConfig(['--grpc-port', 'off'], {}).grpcPort).toBe(-1);
  expect(parseEdgeConfig([], { EDGE_GRPC_PORT: 'off' }).grpcPort).toBe(-1);
  expect(parseEdgeConfig(['--config', file], {}).grpcPort).toBe(-1);
  expect(parseEdgeConfig(['--grpc-port', '0'], {}).grpcPort).toBe(0);
  expect(() => parseEdgeConfig([], { EDGE_GRPC_PORT: '-1' })).toThrow('EDGE_GRPC_PORT: grpcPort must be an integer ≥ 0 or off, got "-1"');
  expect(() => parseEdgeConfig(['--port', 'off'], {})).toThrow('--port: port must be an integer ≥ 0, got "off"');
  expect(EDGE_USAGE).toContain('--grpc-port N|off');
});

test('bad settings are INVALID_ARGUMENT errors naming their source', () => {
  const cases: [string[], Record<string, string>, RegExp][] = [
    [['--port', 'x'], {}, /--port: port must be an integer/],
    [[], { EDGE_MAX_CONCURRENT: '0' }, /EDGE_MAX_CONCURRENT: maxConcurrent must be an integer ≥ 1/],
    [['--log-level', 'loud'], {}, /logLevel must be one of debug, info, warn, error/],
    [['--cloud', 'no-port'], {}, /--cloud must be host:port or 'none'/],
    [['--cloud-tls-cert', 'c.pem'], {}, /needs both --cloud-tls-cert and --cloud-tls-key/],
    [['--bogus'], {}, /Unknown option/],
    [['--idle-timeout', '0'], {}, /--idle-timeout: idleTimeout must be an integer ≥ 1/],
    [['--idle-timeout', '256'], {}, /--idle-timeout must be ≤ 255 seconds, got 256/],
    [[], { EDGE_MAX_OPEN_REQUESTS: '0' }, /EDGE_MAX_OPEN_REQUESTS: maxOpenRequests must be an integer ≥ 1/],
  ];
  for (const [argv, env, message] of cases) expect(() => parseEdgeConfig(argv, env)).toThrow(message);
  const file = join(dir, 'bad.json');
  writeFileSync(file, JSON.stringify({ prot: 1 }));
  expect(() => parseEdgeConfig(['--config', file], {})).toThrow(/unknown key "prot"/);
});

test('the HTTP connection limits: defaults, flags and variables', () => {
  expect(parseEdgeConfig([], {})).toMatchObject({ idleTimeout: 30, maxOpenRequests: 256 });
  expect(parseEdgeConfig(['--idle-timeout', '5'], { EDGE_MAX_OPEN_REQUESTS: '64' })).toMatchObject({ idleTimeout: 5, maxOpenRequests: 64 });
  expect(EDGE_USAGE).toContain('--idle-timeout N');
  expect(EDGE_USAGE).toContain('--max-open-requests N');
});

test('usage lists every setting with its variable and default', () => {
  expect(EDGE_USAGE).toContain('--cloud-deadline-ms N');
  expect(EDGE_USAGE).toContain('EDGE_<NAME>');
  expect(EDGE_USAGE).toContain('(default 8080)');
});

test('--speculate auto|on|off (EDGE_SPECULATE): auto by default, anything else refused', () => {
  expect(DEFAULT_EDGE_CONFIG.speculate).toBe('auto');
  expect(parseEdgeConfig(['--speculate', 'off'], {}).speculate).toBe('off');
  expect(parseEdgeConfig([], { EDGE_SPECULATE: 'on' }).speculate).toBe('on');
  expect(EDGE_USAGE).toContain('--speculate auto|on|off');
  expect(() => parseEdgeConfig(['--speculate', 'true'], {})).toThrow('--speculate');
});

test('--model-thread worker|main (EDGE_MODEL_THREAD): worker by default, anything else refused', () => {
  expect(DEFAULT_EDGE_CONFIG.modelThread).toBe('worker');
  expect(parseEdgeConfig(['--model-thread', 'main'], {}).modelThread).toBe('main');
  expect(parseEdgeConfig([], { EDGE_MODEL_THREAD: 'main' }).modelThread).toBe('main');
  expect(() => parseEdgeConfig([], { EDGE_MODEL_THREAD: 'Worker' })).toThrow(/EDGE_MODEL_THREAD/);
  expect(EDGE_USAGE).toContain('--model-thread worker|main');
  expect(() => parseEdgeConfig(['--model-thread', 'gpu'], {})).toThrow(/--model-thread: modelThread must be one of worker, main/);
});

test('--route-share, --route-tokens-per-minute, --route-wait-ms: unset by default, from every source, checked', () => {
  expect([DEFAULT_EDGE_CONFIG.routeShare, DEFAULT_EDGE_CONFIG.routeTokensPerMinute, DEFAULT_EDGE_CONFIG.routeWaitMs]).toEqual([
    undefined,
    undefined,
    undefined,
  ]);
  expect(routeBudgetOf(parseEdgeConfig([], {}))).toEqual({});
  const file = join(dir, 'budget.json');
  writeFileSync(file, JSON.stringify({ routeWaitMs: 300 }));
  const config = parseEdgeConfig(['--config', file, '--route-share', '0.1'], { EDGE_ROUTE_TOKENS_PER_MINUTE: '20000' });
  expect(routeBudgetOf(config)).toEqual({ routeShare: 0.1, routeTokensPerMinute: 20_000, routeWaitMs: 300 });
  expect(EDGE_USAGE).toContain('--route-share N');
  expect(EDGE_USAGE).toContain('--route-tokens-per-minute N');
  expect(EDGE_USAGE).toContain('--route-wait-ms N');
  const cases: [string[], Record<string, string>, string][] = [
    [['--route-share', '0'], {}, '--route-share must be in (0, 1], got 0'],
    [['--route-share', '1.5'], {}, '--route-share must be in (0, 1], got 1.5'],
    [['--route-share', 'ten'], {}, '--route-share: routeShare must be a number ≥ 0, got "ten"'],
    [[], { EDGE_ROUTE_TOKENS_PER_MINUTE: '0' }, 'EDGE_ROUTE_TOKENS_PER_MINUTE: routeTokensPerMinute must be an integer ≥ 1, got "0"'],
    [['--route-tokens-per-minute', '20000000'], {}, '--route-tokens-per-minute must be ≤ 10000000, got 20000000'],
    [['--route-wait-ms', '2.5'], {}, '--route-wait-ms: routeWaitMs must be an integer ≥ 1, got "2.5"'],
    [['--route-wait-ms', '600001'], {}, '--route-wait-ms must be ≤ 600000, got 600001'],
  ];
  for (const [argv, env, message] of cases) expect(() => parseEdgeConfig(argv, env)).toThrow(message);
});

test('--private-detect KINDS and repeatable --private-pattern KIND=REGEX: none by default, from every source, checked', () => {
  expect(parseEdgeConfig([], {}).privateDetection).toEqual({ kinds: [], patterns: [] });
  const config = parseEdgeConfig(
    ['--private-detect', 'phone,email,ticket', '--private-pattern', 'ticket=TCK-\\d+', '--private-pattern', 'badge=EMP-\\d{6}'],
    {},
  );
  expect(config.privateDetection).toEqual({
    kinds: ['email', 'phone', 'ticket', 'badge'],
    patterns: [
      { kind: 'ticket', pattern: 'TCK-\\d+' },
      { kind: 'badge', pattern: 'EMP-\\d{6}' },
    ],
  });
  expect(Object.isFrozen(config.privateDetection) && Object.isFrozen(config.privateDetection.patterns)).toBe(true);
  // The variable holds one pattern a line; the file an array; a flag's list replaces the variable's.
  const env = { EDGE_PRIVATE_DETECT: 'all', EDGE_PRIVATE_PATTERN: 'ticket=TCK-\\d+\nbadge=EMP-\\d{6}\n' };
  expect(parseEdgeConfig([], env).privateDetection.kinds).toEqual(['email', 'phone', 'card', 'iban', 'ip', 'ticket', 'badge']);
  expect(parseEdgeConfig(['--private-pattern', 'room=R\\d{3}'], env).privateDetection.patterns).toEqual([{ kind: 'room', pattern: 'R\\d{3}' }]);
  const file = join(dir, 'private.json');
  writeFileSync(file, JSON.stringify({ privateDetect: 'ip', privatePattern: ['ticket=TCK-\\d+'] }));
  expect(parseEdgeConfig(['--config', file], {}).privateDetection).toEqual({ kinds: ['ip', 'ticket'], patterns: [{ kind: 'ticket', pattern: 'TCK-\\d+' }] });
  expect(EDGE_USAGE).toContain('--private-detect KINDS');
  expect(EDGE_USAGE).toContain('--private-pattern KIND=REGEX (repeatable)');
  const badFile = join(dir, 'private-bad.json');
  writeFileSync(badFile, JSON.stringify({ privatePattern: 5 }));
  const cases: [string[], Record<string, string>, string][] = [
    [['--private-detect', 'emails'], {}, '--private-detect: unknown kind "emails"; known: email, phone, card, iban, ip (or all, none)'],
    [[], { EDGE_PRIVATE_DETECT: 'all,ip' }, '--private-detect: all stands alone'],
    [['--private-pattern', 'ticket'], {}, '--private-pattern must be KIND=REGEX, got "ticket"'],
    [['--private-pattern', 'Ticket=x'], {}, 'the kind must be lowercase [a-z][a-z0-9_]{0,15}'],
    [['--private-pattern', 'iban=x'], {}, 'iban is a built-in kind'],
    [
      ['--private-pattern', 'pair=(\\w)\\1'],
      {},
      '--private-pattern pair=(\\w)\\1: does not compile under the linear-time engine (RE2; no backreferences or lookaround): error parsing regexp: invalid escape sequence: `\\1`',
    ],
    [['--config', badFile], {}, 'privatePattern must be a string or an array of strings, got 5'],
  ];
  for (const [argv, env, message] of cases) expect(() => parseEdgeConfig(argv, env)).toThrow(message);
});
