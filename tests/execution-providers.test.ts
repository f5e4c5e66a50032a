/**
 * onnxruntime execution providers as a setting: the list is parsed and checked at start-up against what
 * this platform's onnxruntime-node has; `cpu` runs; an unavailable provider is refused with a message naming
 * the available ones; a list ending in `cpu` falls back with a logged warning and decodes the same greedy ids.
 * WebGPU is tried for real: on a machine without a WebGPU adapter (Debian 12's lavapipe is refused by Dawn
 * for lacking shaderUniform*ArrayDynamicIndexing) it must fall back; where an adapter exists it must decode.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { parseShimConfig, shimConfig } from '../src/cloud/config.ts';
import { createBackend } from '../src/cloud/backends/create-backend.ts';
import { EmbeddedBackend } from '../src/cloud/backends/embedded-backend.ts';
import { parseEdgeConfig } from '../src/edge/config.ts';
import { startEdge, type RunningEdge } from '../src/edge/server/edge-server.ts';
import { DecoderModel } from '../src/shared/model/decoder-model.ts';
import { availableExecutionProviders, parseExecutionProviders, resolveExecutionProviders } from '../src/shared/model/execution-providers.ts';
import { createLogger, silentLogger } from '../src/shared/process/logger.ts';
import { loadModelPack } from '../src/shared/model/model-pack.ts';
import { ort } from '../src/shared/model/ort.ts';
import { DEMO } from '../src/shared/paths.ts';

/** A logger that keeps its JSON lines for the test to read. */
function recordingLogger() {
  const lines: Record<string, unknown>[] = [];
  return { lines, log: createLogger('test', 'debug', (l) => lines.push(JSON.parse(l))) };
}

/** A provider name onnxruntime knows but this platform's build lacks (CoreML is macOS-only, DirectML Windows-only). */
const UNAVAILABLE = ['coreml', 'dml', 'nnapi'].find((n) => !availableExecutionProviders().includes(n))!;

async function greedyIds(model: DecoderModel, prompt: number[], steps: number): Promise<number[]> {
  const seq = model.newSequence();
  try {
    const ids: number[] = [];
    let { logits } = await seq.append(prompt);
    for (let i = 0; i < steps; i++) {
      const next = logits.indexOf(Math.max(...logits));
      ids.push(next);
      ({ logits } = await seq.append([next]));
    }
    return ids;
  } finally {
    seq.dispose();
  }
}

const PROMPT = [1, 403, 407, 261];
let cpuModel: DecoderModel;
let cpuIds: number[];

beforeAll(async () => {
  cpuModel = await DecoderModel.load(loadModelPack(DEMO.edgePack), { executionProviders: ['cpu'] });
  cpuIds = await greedyIds(cpuModel, PROMPT, 12);
});
afterAll(() => cpuModel.release());

test('provider lists are parsed in order, case and spaces ignored; malformed and repeated names are refused', () => {
  expect(parseExecutionProviders(' WebGPU , cpu')).toEqual(['webgpu', 'cpu']);
  expect(parseExecutionProviders('cpu')).toEqual(['cpu']);
  expect(() => parseExecutionProviders('cuda,,cpu')).toThrow('--execution-provider takes onnxruntime provider names separated by commas');
  expect(() => parseExecutionProviders('cpu,CPU')).toThrow('--execution-provider names cpu twice');
  expect(parseEdgeConfig(['--execution-provider', 'CUDA, cpu'], {}).executionProvider).toBe('cuda,cpu');
  expect(parseEdgeConfig([], { EDGE_EXECUTION_PROVIDER: 'coreml,cpu' }).executionProvider).toBe('coreml,cpu');
  expect(parseEdgeConfig([], {}).executionProvider).toBe('cpu');
  expect(parseShimConfig(['--execution-provider', 'webgpu,cpu'], {}).executionProvider).toBe('webgpu,cpu');
  expect(() => parseShimConfig([], { SHIM_EXECUTION_PROVIDER: 'cuda;cpu' })).toThrow('takes onnxruntime provider names');
});

test('resolving: a missing provider is an error naming the available ones, or dropped with a warning when the list ends in cpu', () => {
  expect(resolveExecutionProviders(['cuda', 'cpu'], ['cpu', 'cuda'])).toEqual(['cuda', 'cpu']);
  expect(() => resolveExecutionProviders(['coreml'], ['cpu', 'webgpu'])).toThrow("execution provider coreml is not available in this platform's onnxruntime");
  expect(() => resolveExecutionProviders(['coreml', 'webgpu'], ['cpu', 'webgpu'])).toThrow('available: cpu, webgpu');
  const { lines, log } = recordingLogger();
  expect(resolveExecutionProviders(['coreml', 'webgpu', 'cpu'], ['cpu', 'webgpu'], log)).toEqual(['webgpu', 'cpu']);
  expect(lines).toEqual([
    expect.objectContaining({ level: 'warn', msg: 'execution provider not available; falling back', missing: ['coreml'], using: ['webgpu', 'cpu'] }),
  ]);
});

test("the available list is onnxruntime-node's bundled providers plus installed ones, cpu always among them", () => {
  const available = availableExecutionProviders();
  expect(available).toContain('cpu');
  const bundled = ort
    .listSupportedBackends()
    .filter((b) => b.bundled)
    .map((b) => b.name);
  for (const name of bundled) expect(available).toContain(name);
});

test('cpu: the session runs on it and says so', () => {
  expect(cpuModel.executionProviders).toEqual(['cpu']);
  expect(cpuIds).toHaveLength(12);
});

test('an unavailable provider fails the load with a message naming the available ones', async () => {
  const available = availableExecutionProviders();
  const load = DecoderModel.load(loadModelPack(DEMO.edgePack), { executionProviders: [UNAVAILABLE] });
  await expect(load).rejects.toThrow(
    `execution provider ${UNAVAILABLE} is not available in this platform's onnxruntime (${process.platform}/${process.arch}); available: ${available.join(', ')}`,
  );
});

test('a list ending in cpu falls back to it with a warning and decodes the same greedy ids', async () => {
  const { lines, log } = recordingLogger();
  const model = await DecoderModel.load(loadModelPack(DEMO.edgePack), { executionProviders: [UNAVAILABLE, 'cpu'], log });
  try {
    expect(model.executionProviders).toEqual(['cpu']);
    expect(lines.map((l) => [l.level, l.msg, l.missing])).toEqual([['warn', 'execution provider not available; falling back', [UNAVAILABLE]]]);
    expect(await greedyIds(model, PROMPT, 12)).toEqual(cpuIds);
  } finally {
    await model.release();
  }
});

test('webgpu,cpu: runs on WebGPU where an adapter exists, otherwise falls back to cpu with a warning; the ids match either way', async () => {
  const adapter = await ort.InferenceSession.create(DEMO.edgePack + '/model.onnx', { executionProviders: ['webgpu'] }).then(
    async (s) => (await s.release(), true),
    () => false,
  );
  const { lines, log } = recordingLogger();
  const model = await DecoderModel.load(loadModelPack(DEMO.edgePack), { executionProviders: ['webgpu', 'cpu'], log });
  try {
    if (adapter) {
      expect(model.executionProviders).toEqual(['webgpu', 'cpu']);
      expect(lines).toEqual([]);
    } else {
      expect(model.executionProviders).toEqual(['cpu']);
      expect(lines).toEqual([
        expect.objectContaining({ level: 'warn', msg: 'execution provider could not start; falling back to cpu', providers: ['webgpu', 'cpu'] }),
      ]);
      expect(String(lines[0]!.error)).toContain('WebGPU adapter');
    }
    expect(await greedyIds(model, PROMPT, 12)).toEqual(cpuIds);
  } finally {
    await model.release();
  }
  // Without cpu at the end, a provider that cannot start is a start-up error naming it.
  if (!adapter)
    await expect(DecoderModel.load(loadModelPack(DEMO.edgePack), { executionProviders: ['webgpu'] })).rejects.toThrow(
      'execution provider webgpu could not start',
    );
});

test('the edge refuses to start on an unavailable provider, naming the available ones', async () => {
  const config = parseEdgeConfig(['--port', '0', '--grpc-port', 'off', '--cloud', 'none', '--execution-provider', UNAVAILABLE], {});
  await expect(startEdge(config, { log: silentLogger })).rejects.toThrow(`available: ${availableExecutionProviders().join(', ')}`);
});

test("the shim's embedded backend takes the same setting: refused when unavailable, a fallback when it ends in cpu", async () => {
  await expect(createBackend(shimConfig({ executionProvider: UNAVAILABLE }), undefined)).rejects.toThrow(
    `available: ${availableExecutionProviders().join(', ')}`,
  );
  const { lines, log } = recordingLogger();
  const backend = await createBackend(shimConfig({ executionProvider: `${UNAVAILABLE},cpu` }), undefined, log);
  try {
    expect(backend).toBeInstanceOf(EmbeddedBackend);
    expect((backend as EmbeddedBackend).model.executionProviders).toEqual(['cpu']);
    expect(lines.map((l) => l.msg)).toEqual(['execution provider not available; falling back']);
  } finally {
    await backend.close();
  }
});

let edge: RunningEdge | undefined;
afterAll(() => edge?.stop());

test('the edge on a fallback list: /api/info, the page and the Prometheus info gauge say cpu runs', async () => {
  const config = parseEdgeConfig(
    ['--host', '127.0.0.1', '--port', '0', '--grpc-port', 'off', '--cloud', 'none', '--execution-provider', `${UNAVAILABLE},cpu`],
    {},
  );
  edge = await startEdge(config, { log: silentLogger });
  const info = (await (await fetch(new URL('/api/info', edge.url))).json()) as { execution_providers: string[] };
  expect(info.execution_providers).toEqual(['cpu']);
  expect(await (await fetch(edge.url)).text()).toContain('The edge model runs on onnxruntime with the cpu execution provider.');
  expect(await (await fetch(new URL('/metrics', edge.url))).text()).toContain('edge_execution_provider_info{provider="cpu",providers="cpu"} 1');
});
