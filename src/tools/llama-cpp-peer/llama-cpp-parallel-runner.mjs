// llama.cpp's side of `bench concurrency --peer`: node-llama-cpp holding one GGUF loaded between the user counts
// the parent alternates with ours. Runs under node, started by llama-cpp-parallel.ts, and speaks the line protocol
// of src/tools/bench/line-process.ts. Input: one JSON argument {modelPath, threads}; prints {"type":"ready"} once the
// model is loaded, then answers {"type":"users","prompts":number[][],"newTokens"} with {"type":"users","users":
// [{stamps, tokens}],"wallMs"}: one context with a sequence per prompt, every user's evaluation started together,
// so node-llama-cpp puts their tokens into shared batches (its "maximumParallelism" strategy); stamps are ms after
// the start. Exits when its stdin closes.
import { answerLines, loadLlamaModel, runHelper, say } from './llama-cpp-helper.mjs';

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

await runHelper(async () => {
  const request = JSON.parse(process.argv[2]);
  const { llama, model } = await loadLlamaModel(request.modelPath);
  say({ type: 'ready' });
  await answerLines(async (message) => {
    if (message.type !== 'users') throw new Error(`unknown request ${JSON.stringify(message.type)} (known: users)`);
    const { prompts, newTokens } = message;
    if (!Array.isArray(prompts) || prompts.length === 0 || !prompts.every((p) => Array.isArray(p) && p.length > 0))
      throw new Error('"prompts" must be a non-empty list of non-empty token id lists');
    if (!(Number.isInteger(newTokens) && newTokens >= 1)) throw new Error(`"newTokens" must be a whole number ≥ 1, got ${JSON.stringify(newTokens)}`);
    return { type: 'users', ...(await runUsers(model, request.threads, prompts, newTokens)) };
  });
  await model.dispose();
  await llama.dispose();
});
