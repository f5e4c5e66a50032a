// llama.cpp's side of `bench decode --peer`: node-llama-cpp holding one GGUF loaded and prefilled between the
// rounds the parent alternates with ours. Runs under node (node-llama-cpp's native addon is built for node, not
// bun), started by llama-cpp-peer.ts with the package's folder as NODE_LLAMA_CPP_DIR, and speaks the line protocol
// of src/tools/bench/line-process.ts. Input: one JSON argument {modelPath, threads, promptIds, plannedSteps}.
// Prints {"type":"ready","prefillMs","threads"} once the prompt and the first token are evaluated, then answers
// {"type":"warmup","steps"} → {"type":"warmup"}, {"type":"round","steps"} → {"type":"round","stepsMs"},
// {"type":"finish"} → {"type":"finish","tokens"} (the greedy tokens so far). Exits when its stdin closes.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

try {
  const request = JSON.parse(process.argv[2]);
  const require = createRequire(join(process.env.NODE_LLAMA_CPP_DIR, 'package.json'));
  const { getLlama } = await import(pathToFileURL(require.resolve('node-llama-cpp')).href);
  // build: "never" loads the prebuilt CPU binary and fails rather than compiling llama.cpp here.
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  const model = await llama.loadModel({ modelPath: request.modelPath });
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
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    try {
      const message = JSON.parse(line);
      const steps = message.steps;
      if (message.type !== 'finish' && !(Number.isInteger(steps) && steps >= 1)) throw new Error(`"steps" must be a whole number ≥ 1, got ${JSON.stringify(steps)}`);
      if (message.type === 'warmup') {
        for (let i = 0; i < steps; i++) await step();
        say({ type: 'warmup' });
      } else if (message.type === 'round') {
        const stepsMs = [];
        for (let i = 0; i < steps; i++) stepsMs.push(await step());
        say({ type: 'round', stepsMs });
      } else if (message.type === 'finish') say({ type: 'finish', tokens: generated });
      else throw new Error(`unknown request ${JSON.stringify(message.type)} (known: warmup, round, finish)`);
    } catch (e) {
      say({ type: 'failed', message: e instanceof Error ? e.message : String(e) });
    }
  }
  await tokens.return();
  await context.dispose();
  await model.dispose();
  await llama.dispose();
} catch (e) {
  say({ type: 'failed', message: e instanceof Error ? e.message : String(e) });
  process.exitCode = 1;
}
