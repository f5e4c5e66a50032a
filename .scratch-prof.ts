import { compilerFor, prepareConstraint } from './src/edge/constraint/generation-constraint.ts';
import { readConstraint } from './src/edge/constraint/constraint-spec.ts';
import { loadModelPack } from './src/shared/model/model-pack.ts';
import { TextTokenizer } from './src/shared/text/tokenizer.ts';
import { median } from './src/shared/statistics.ts';
import { loadXGrammar } from './src/edge/constraint/xgrammar-module.ts';
const dir = 'models/bench/qwen2.5-0.5b';
const pack = loadModelPack(dir);
const tokenizer = await TextTokenizer.fromPack(dir);
const engine = { edgeModel: { pack }, tokenizer } as any;
await prepareConstraint(engine, { constraint: readConstraint({ regex: 'ab' })!, maxNewTokens: 16 });
const xg = await loadXGrammar();
const obj = (count: number, kind: unknown, tag: string) => { const props = Object.fromEntries(Array.from({ length: count }, (_, i) => [`${tag}_${i}`, kind])); return { type: 'object', properties: props, required: Object.keys(props), additionalProperties: false }; };
let n = 0;
const variants: Record<string, string> = {
  original: '',
  star: 'basic_string_sub ::= ([^\\0-\\x1f\\"\\\\\\r\\n] | ("\\\\" basic_escape))* "\\"" (=([ \\n\\t]* [,}\\]:]))',
  starNoLookahead: 'basic_string_sub ::= ([^\\0-\\x1f\\"\\\\\\r\\n] | ("\\\\" basic_escape))* "\\""',
  recursiveNoLookahead: 'basic_string_sub ::= (("\\"") | ([^\\0-\\x1f\\"\\\\\\r\\n] basic_string_sub) | ("\\\\" basic_escape basic_string_sub))',
  charStar: 'basic_string_sub ::= [^\\0-\\x1f\\"\\\\\\r\\n]* "\\""',
};
for (const [name, rule] of Object.entries(variants)) {
  const times = [];
  for (let r = 0; r < 5; r++) {
    const schema = JSON.stringify(obj(20, { type: 'string' }, `v${n++}`));
    let ebnf = (await xg.Grammar.fromJSONSchema(schema, false, -1)).toString();
    if (rule) ebnf = ebnf.replace(/^basic_string_sub ::= .*$/m, rule);
    const compiler = (await (compilerFor(engine) as any).start()).compiler;
    const t = performance.now();
    const g = await compiler.compileGrammar(ebnf);
    times.push(performance.now() - t);
    g.dispose();
  }
  console.log(name, median(times).toFixed(1), times.map((x) => x.toFixed(0)).join(' '));
}
