import { ort } from '../shared/ort.ts';
import { loadModelPack } from '../shared/model-pack.ts';
const pack = loadModelPack(process.argv[2]!);
const threads = Number(process.argv[3] ?? 2);
const s = await ort.InferenceSession.create(pack.modelPath, { intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all', enableProfiling: true, profileFilePrefix: '/tmp/prof/p' });
const { numLayers, numKvHeads, headDim } = pack;
let past: Record<string, any> = {};
for (let i = 0; i < numLayers; i++) for (const k of ['key', 'value']) past[`past_key_values.${i}.${k}`] = new ort.Tensor('float32', new Float32Array(0), [1, numKvHeads, 0, headDim]);
let len = 0;
async function step(ids: number[]) {
  const n = ids.length; const total = len + n;
  const feeds = { ...past, input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, n]), attention_mask: new ort.Tensor('int64', new BigInt64Array(total).fill(1n), [1, total]), position_ids: new ort.Tensor('int64', BigInt64Array.from({ length: n }, (_, i) => BigInt(len + i)), [1, n]) };
  const t = performance.now();
  const out = await s.run(feeds);
  const ms = performance.now() - t;
  for (const name of Object.keys(past)) past[name] = out[name.replace('past_key_values', 'present')];
  len = total;
  return ms;
}
await step(Array.from({ length: 100 }, (_, i) => 1000 + i));
const times = [];
for (let i = 0; i < 12; i++) times.push(await step([42]));
console.log('step ms', times.map((t) => t.toFixed(1)).join(' '));
const file = s.endProfiling();
console.log(file);
