// Times llama.cpp decoding several sequences at once through node-llama-cpp: one context with a sequence per
// user, every user's evaluation started together, so node-llama-cpp puts their tokens into shared batches
// (its "maximumParallelism" strategy). Runs under node, started by llama-cpp-parallel.ts.
// Input: one JSON argument {modelPath, threads, prompts: number[][], newTokens}; output: one JSON line with each
// user's token timestamps (ms after the start) and ids.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const request = JSON.parse(process.argv[2]);
const require = createRequire(join(process.env.NODE_LLAMA_CPP_DIR, 'package.json'));
const { getLlama } = await import(pathToFileURL(require.resolve('node-llama-cpp')).href);

const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
const model = await llama.loadModel({ modelPath: request.modelPath });
const longest = Math.max(...request.prompts.map((p) => p.length));
const context = await model.createContext({
  sequences: request.prompts.length,
  // Per sequence: node-llama-cpp gives each its own cells.
  contextSize: longest + request.newTokens + 8,
  threads: request.threads,
  batchSize: longest * request.prompts.length,
});
const sequences = request.prompts.map(() => context.getSequence());
const start = performance.now();
const users = await Promise.all(
  request.prompts.map(async (ids, u) => {
    const stamps = [];
    const tokens = [];
    // Greedy, and nothing that would stop early: the weights are random, so an end-of-text token may come.
    for await (const token of sequences[u].evaluate(ids, { temperature: 0 })) {
      stamps.push(performance.now() - start);
      tokens.push(token);
      if (tokens.length >= request.newTokens) break;
    }
    return { stamps, tokens };
  }),
);
console.log(JSON.stringify({ users, wallMs: performance.now() - start, threads: context.currentThreads ?? request.threads }));
await context.dispose();
await model.dispose();
await llama.dispose();
