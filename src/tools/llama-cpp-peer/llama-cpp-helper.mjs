// What the two llama.cpp runners (llama-cpp-runner.mjs for `bench decode --peer`, llama-cpp-parallel-runner.mjs
// for `bench concurrency --peer`) share: loading node-llama-cpp from NODE_LLAMA_CPP_DIR and a GGUF with it, and
// the helper's side of the line protocol of src/tools/bench/line-process.ts (one JSON message a line each way, a
// request that fails answered with {"type":"failed","message"} while the helper stays usable).
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

export const say = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);

const failed = (e) => ({ type: 'failed', message: e instanceof Error ? e.message : String(e) });

/** node-llama-cpp's prebuilt CPU binary (build: "never" fails rather than compiling llama.cpp here) with `modelPath` loaded. */
export async function loadLlamaModel(modelPath) {
  const require = createRequire(join(process.env.NODE_LLAMA_CPP_DIR, 'package.json'));
  const { getLlama } = await import(pathToFileURL(require.resolve('node-llama-cpp')).href);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  const model = await llama.loadModel({ modelPath });
  return { llama, model };
}

/** Answers each request line on stdin with what `answer(message)` returns, or a failure; returns when stdin closes. */
export async function answerLines(answer) {
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    try {
      say(await answer(JSON.parse(line)));
    } catch (e) {
      say(failed(e));
    }
  }
}

/** Runs the helper's `main`; a failure outside any request is said as one and exits with 1. */
export async function runHelper(main) {
  try {
    await main();
  } catch (e) {
    say(failed(e));
    process.exitCode = 1;
  }
}
