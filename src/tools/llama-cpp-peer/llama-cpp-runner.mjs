// Times llama.cpp decode through node-llama-cpp. Runs under node (node-llama-cpp's native addon is built
// for node, not bun), started by llama-cpp-peer.ts with the package's folder as NODE_LLAMA_CPP_DIR.
// Input: one JSON argument {modelPath, threads, promptIds, warmup, steps}; output: one JSON line on stdout
// with each measured step's milliseconds, the prefill's (prompt + first token) and the greedy tokens
// (which let a test of the conversion compare them with ours).
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const request = JSON.parse(process.argv[2]);
const require = createRequire(join(process.env.NODE_LLAMA_CPP_DIR, 'package.json'));
const { getLlama } = await import(pathToFileURL(require.resolve('node-llama-cpp')).href);

// build: "never" loads the prebuilt CPU binary and fails rather than compiling llama.cpp here.
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath: request.modelPath });
const context = await model.createContext({
  contextSize: request.promptIds.length + request.warmup + request.steps + 8,
  threads: request.threads,
  batchSize: request.promptIds.length,
});
const sequence = context.getSequence();
const stepsMs = [];
const tokens = [];
let prefillMs = 0;
let count = 0;
let last = performance.now();
const start = last;
// Greedy, and nothing that would stop early: the weights are random, so an end-of-text token may come.
for await (const token of sequence.evaluate(request.promptIds, { temperature: 0 })) {
  const now = performance.now();
  if (count === 0) prefillMs = now - start;
  else if (count > request.warmup) stepsMs.push(now - last);
  last = now;
  count++;
  tokens.push(token);
  if (count > request.warmup + request.steps) break;
}
console.log(JSON.stringify({ prefillMs, stepsMs, tokens, threads: context.currentThreads ?? request.threads }));
await context.dispose();
await model.dispose();
await llama.dispose();
