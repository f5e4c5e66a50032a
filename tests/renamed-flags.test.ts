/**
 * The two models are the edge model and the cloud model everywhere; their flags and variables were once
 * `slm` and `llm`. The old spellings stay accepted (a user's scripts and config files must not break), the
 * new name wins where both come from one source, and --help names the old spelling.
 */
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EDGE_USAGE, parseEdgeConfig } from '../src/edge/config.ts';
import { PROJECT_ROOT } from '../src/shared/paths.ts';
import { parseLatencyFlags } from '../src/tools/bench/latency-options.ts';
import { UsageError } from '../src/tools/cli-support.ts';
import { EVAL_USAGE, parseEvalOptions } from '../src/tools/eval/eval-options.ts';

const dir = mkdtempSync(join(tmpdir(), 'renamed-flags-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('the edge: --edge-model and --slm, EDGE_EDGE_MODEL and EDGE_SLM, "edgeModel" and "slm" in the file', () => {
  const pick = (argv: string[], env: Record<string, string> = {}) => {
    const config = parseEdgeConfig(argv, env);
    return [config.edgeModel, config.edgeModelFile];
  };
  expect(pick(['--edge-model', 'a', '--edge-model-file', 'm_q4.onnx'])).toEqual(['a', 'm_q4.onnx']);
  expect(pick(['--slm', 'a', '--slm-file', 'm_q4.onnx'])).toEqual(['a', 'm_q4.onnx']);
  expect(pick([], { EDGE_EDGE_MODEL: 'b', EDGE_EDGE_MODEL_FILE: 'm_fp16.onnx' })).toEqual(['b', 'm_fp16.onnx']);
  expect(pick([], { EDGE_SLM: 'b', EDGE_SLM_FILE: 'm_fp16.onnx' })).toEqual(['b', 'm_fp16.onnx']);
  const file = join(dir, 'old.json');
  writeFileSync(file, JSON.stringify({ slm: 'c', slmFile: 'm.onnx' }));
  expect(pick(['--config', file])).toEqual(['c', 'm.onnx']);
  // Within one source the new name wins; across sources the usual order holds, whichever spelling each uses.
  expect(pick(['--slm', 'old', '--edge-model', 'new'])[0]).toBe('new');
  expect(pick([], { EDGE_SLM: 'old', EDGE_EDGE_MODEL: 'new' })[0]).toBe('new');
  expect(pick(['--slm', 'flag'], { EDGE_EDGE_MODEL: 'env' })[0]).toBe('flag');
  expect(pick(['--config', file], { EDGE_EDGE_MODEL: 'env' })[0]).toBe('env');
  expect(() => pick(['--slm-file', '../x.onnx'])).toThrow(/--edge-model-file must be a \.onnx file name/);
});

test("the edge's --help names the old spellings", () => {
  expect(EDGE_USAGE).toContain('--edge-model VALUE\n');
  expect(EDGE_USAGE).toContain('(old name: --slm, EDGE_SLM)');
  expect(EDGE_USAGE).toContain('(old name: --slm-file, EDGE_SLM_FILE)');
});

test('eval and bench latency: --edge-model/--cloud-model and their old names --slm/--llm give the same options', () => {
  const fresh = parseEvalOptions([
    '--dataset',
    'x.txt',
    '--edge-model',
    'e',
    '--cloud-model',
    'c',
    '--edge-model-file',
    'e.onnx',
    '--cloud-model-file',
    'c.onnx',
  ]);
  const old = parseEvalOptions(['--dataset', 'x.txt', '--slm', 'e', '--llm', 'c', '--slm-file', 'e.onnx', '--llm-file', 'c.onnx']);
  expect(old).toEqual(fresh);
  expect(fresh).toMatchObject({ edgeModel: 'e', cloudModel: 'c', edgeModelFile: 'e.onnx', cloudModelFile: 'c.onnx' });
  expect(parseLatencyFlags(['--slm', 'e', '--llm', 'c']).options).toMatchObject({ edgeModel: 'e', cloudModel: 'c' });
  expect(parseLatencyFlags(['--edge-model', 'e', '--cloud-model', 'c']).options).toMatchObject({ edgeModel: 'e', cloudModel: 'c' });
  expect(() => parseLatencyFlags(['--cloud', 'h:1', '--llm', 'c'])).toThrow(
    new UsageError('give the cloud either as --cloud-model PACK (in this process) or as --cloud HOST:PORT (a running shim), not both'),
  );
  expect(() => parseEvalOptions(['--dataset', 'x.txt', '--slm', 'a', '--edge-model', 'b'])).toThrow(
    new UsageError('--edge-model and --slm (its old name) are both given'),
  );
  expect(EVAL_USAGE).toContain('(old name: --slm)');
});

test('bun run router train --help lists the new flags and says the old ones still work', () => {
  const child = Bun.spawnSync(['bun', 'src/tools/router/cli.ts', 'train', '--help'], { cwd: PROJECT_ROOT });
  const usage = child.stdout.toString();
  expect(child.exitCode).toBe(0);
  expect(usage).toContain('train --edge-model PACK (--cloud-model PACK | --cloud HOST:PORT) --text FILE');
  expect(usage).toContain('were --slm, --llm, --slm-file and\n  --llm-file (old names, still accepted)');
});
