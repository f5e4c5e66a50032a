// llama.cpp's side of `bench decode --peer`: node-llama-cpp holding one GGUF loaded and prefilled between the
// rounds the parent alternates with ours. Runs under node (node-llama-cpp's native addon is built for node, not
// bun), started by llama-cpp-peer.ts with the package's folder as NODE_LLAMA_CPP_DIR, and speaks the line protocol
// of src/tools/bench/line-process.ts. Input: one JSON argument {modelPath, threads, promptIds, plannedSteps}.
// Prints {"type":"ready","prefillMs","threads"} once the prompt and the first token are evaluated, then answers
// {"type":"warmup","steps"} → {"type":"warmup"}, {"type":"round","steps"} → {"type":"round","stepsMs"},
// {"type":"finish"} → {"type":"finish","tokens"} (the greedy tokens so far). Exits when its stdin closes.
import { answerLines, loadLlamaModel, runHelper, say } from './llama-cpp-helper.mjs';

await runHelper(async () => {
  const request = JSON.parse(process.argv[2]);
  const { llama, model } = await loadLlamaModel(request.modelPath);
  const context = await model.createContext({
    contextSize: request.promptIds.length + request.plannedSteps + 8,
    threads: request.threads,
    batchSize: request.promptIds.length,
  });
  // Greedy, and nothing that would stop early: the weights are random, so an end-of-text token may come. The
  // generator evaluates the next token only when asked for it, so it sits idle between rounds.
  const tokens = context.getSequence().evaluate(request.promptIds, { temperature: 0, yieldEogToken: true });
  const generated = [];
  const step = async () => {
    const t = performance.now();
    const next = await tokens.next();
    if (next.done) throw new Error(`llama.cpp stopped after ${generated.length} tokens`);
    generated.push(next.value);
    return performance.now() - t;
  };
  const prefillMs = await step();
  say({ type: 'ready', prefillMs, threads: context.currentThreads ?? request.threads });
  await answerLines(async (message) => {
    const steps = message.steps;
    if (message.type !== 'finish' && !(Number.isInteger(steps) && steps >= 1))
      throw new Error(`"steps" must be a whole number ≥ 1, got ${JSON.stringify(steps)}`);
    if (message.type === 'warmup') {
      for (let i = 0; i < steps; i++) await step();
      return { type: 'warmup' };
    }
    if (message.type === 'round') {
      const stepsMs = [];
      for (let i = 0; i < steps; i++) stepsMs.push(await step());
      return { type: 'round', stepsMs };
    }
    if (message.type === 'finish') return { type: 'finish', tokens: generated };
    throw new Error(`unknown request ${JSON.stringify(message.type)} (known: warmup, round, finish)`);
  });
  await tokens.return();
  await context.dispose();
  await model.dispose();
  await llama.dispose();
});
