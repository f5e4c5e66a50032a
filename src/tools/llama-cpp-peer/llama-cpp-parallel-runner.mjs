// llama.cpp's side of `bench concurrency --peer`: node-llama-cpp holding one GGUF loaded between the user counts
// the parent alternates with ours. Runs under node, started by llama-cpp-parallel.ts, and speaks the line protocol
// of src/tools/bench/line-process.ts. Input: one JSON argument {modelPath, threads}; prints {"type":"ready"} once the
// model is loaded, then answers {"type":"users","prompts":number[][],"newTokens"} with {"type":"users","users":
// [{stamps, tokens}],"wallMs"}: one context with a sequence per prompt, every user's evaluation started together,
// so node-llama-cpp puts their tokens into shared batches (its "maximumParallelism" strategy); stamps are ms after
// the start. Exits when its stdin closes.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

async function runUsers(model, threads, prompts, newTokens) {
  const longest = Math.max(...prompts.map((p) => p.length));
  const context = await model.createContext({
    sequences: prompts.length,
    // Per sequence: node-llama-cpp gives each its own cells.
    contextSize: longest + newTokens + 8,
    threads,
    batchSize: longest * prompts.length,
  });
  try {
    const sequences = prompts.map(() => context.getSequence());
    const start = performance.now();
    const users = await Promise.all(
      prompts.map(async (ids, u) => {
        const stamps = [];
        const tokens = [];
        // Greedy, and nothing that would stop early: the weights are random, so an end-of-text token may come.
        for await (const token of sequences[u].evaluate(ids, { temperature: 0, yieldEogToken: true })) {
          stamps.push(performance.now() - start);
          tokens.push(token);
          if (tokens.length >= newTokens) break;
        }
        return { stamps, tokens };
      }),
    );
    return { users, wallMs: performance.now() - start };
  } finally {
    await context.dispose();
  }
}

try {
  const request = JSON.parse(process.argv[2]);
  const require = createRequire(join(process.env.NODE_LLAMA_CPP_DIR, 'package.json'));
  const { getLlama } = await import(pathToFileURL(require.resolve('node-llama-cpp')).href);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  const model = await llama.loadModel({ modelPath: request.modelPath });
  say({ type: 'ready' });
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    try {
      const message = JSON.parse(line);
      if (message.type !== 'users') throw new Error(`unknown request ${JSON.stringify(message.type)} (known: users)`);
      const { prompts, newTokens } = message;
      if (!Array.isArray(prompts) || prompts.length === 0 || !prompts.every((p) => Array.isArray(p) && p.length > 0)) throw new Error('"prompts" must be a non-empty list of non-empty token id lists');
      if (!(Number.isInteger(newTokens) && newTokens >= 1)) throw new Error(`"newTokens" must be a whole number ≥ 1, got ${JSON.stringify(newTokens)}`);
      say({ type: 'users', ...(await runUsers(model, request.threads, prompts, newTokens)) });
    } catch (e) {
      say({ type: 'failed', message: e instanceof Error ? e.message : String(e) });
    }
  }
  await model.dispose();
  await llama.dispose();
} catch (e) {
  say({ type: 'failed', message: e instanceof Error ? e.message : String(e) });
  process.exitCode = 1;
}
