/** The tools' one set of cloud flags (src/tools/cloud-flags.ts), as every tool and `bench latency` read them. */
import { expect, test } from 'bun:test';
import { parseLatencyFlags } from '../src/tools/bench/latency-options.ts';
import { UsageError } from '../src/tools/cli-support.ts';
import { cloudSourceFlags } from '../src/tools/cloud-flags.ts';

test('a running shim with a token from the environment and mutual TLS', () => {
  const values = { cloud: 'gpu:50051', 'cloud-tls-ca': 'ca.pem', 'cloud-tls-cert': 'c.pem', 'cloud-tls-key': 'k.pem' };
  expect(cloudSourceFlags(values, { EDGE_CLOUD_TOKEN: 't' })).toEqual({
    shim: { address: 'gpu:50051', authToken: 't', tlsCa: 'ca.pem', tlsCert: 'c.pem', tlsKey: 'k.pem' },
  });
});

test('bad combinations are usage errors that say which flag', () => {
  const cases: [Record<string, string>, string][] = [
    [{ cloud: 'h:1', 'cloud-tls-cert': 'c.pem' }, 'mutual TLS needs both --cloud-tls-cert and --cloud-tls-key'],
    [{ 'cloud-tls-key': 'k.pem' }, '--cloud-tls-key goes with --cloud HOST:PORT'],
    [{ cloud: 'h:70000' }, '--cloud must be host:port, got h:70000'],
  ];
  for (const [values, message] of cases) expect(() => cloudSourceFlags(values, {}, 'pack')).toThrow(new UsageError(message));
});

test('bench latency takes them: the shim it reaches, or the pack of the shim it starts', () => {
  const env = { EDGE_CLOUD_TOKEN: 'secret' };
  const remote = parseLatencyFlags(['--cloud', 'gpu:50051', '--cloud-tls-ca', 'ca.pem'], env).options;
  expect(remote).toMatchObject({ cloud: 'gpu:50051', cloudToken: 'secret', cloudTls: { caFile: 'ca.pem' } });
  const local = parseLatencyFlags(['--cloud-model', 'packs/cloud'], env).options;
  expect(local).toMatchObject({ cloudModel: 'packs/cloud', cloud: undefined, cloudToken: undefined, cloudTls: undefined });
});
