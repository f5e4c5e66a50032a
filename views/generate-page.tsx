/** @jsxImportSource hono/jsx */
/** The generate and compare pages: the same controls, one or two output panels. */
import type { ViewRouteBudget as RouteBudget, ViewRouterAbout } from './view-model.ts';
import { Layout } from './layout.tsx';
import { RouterAbout } from './router-about.tsx';
import { MarkControls, MarkedList, marksFor, PrivateDetect } from './private-marks.tsx';
import { MaxNewTokensInput, ModeChoice, TemperatureInput, ThresholdSlider } from './run-settings.tsx';

export interface FormDefaults {
  threshold: number;
  maxNewTokens: number;
  maxNewTokensLimit: number;
  /** The edge's speculate setting, which a request that does not say gets. */
  speculate: boolean | 'auto';
  /** The edge's routing budgets (--route-*), filled in so the page's runs hold them too; none when unset. */
  budget: RouteBudget;
  /** onnxruntime's execution providers the edge model runs on, in order of preference. */
  executionProviders: readonly string[];
  /** The kinds the edge's detector finds (`private_detect`); none when it has no detector. */
  privateDetectKinds: readonly string[];
  /** The router the edge serves and what its training measured on held-out text (the about box). */
  router: ViewRouterAbout;
}

function Controls(props: { defaults: FormDefaults; action: string; compare: boolean }) {
  const { defaults } = props;
  return (
    <form class="controls" hx-post={props.action} hx-target="#runs" hx-swap="innerHTML">
      <div class="wide">
        {/* Mark private beside the label: a line of its own would push the first run below a desktop's fold. */}
        <div class="box-head">
          <label for="prompt">Prompt</label>
          <MarkControls id="prompt-private" />
        </div>
        <textarea id="prompt" name="prompt" required placeholder="Once upon a time" {...marksFor('prompt-private')}>
          Once upon a time
        </textarea>
        <MarkedList id="prompt-private" />
      </div>
      <ThresholdSlider id="threshold" threshold={defaults.threshold} help="a token goes to the cloud when the router's score is below τ" />
      {props.compare ? <input type="hidden" name="mode" value="joint" /> : <ModeChoice explained />}
      <BudgetInputs budget={defaults.budget} />
      <MaxNewTokensInput id="max_new_tokens" value={defaults.maxNewTokens} limit={defaults.maxNewTokensLimit} />
      <TemperatureInput id="temperature" />
      <div>
        <label for="speculate">Decode ahead while the cloud answers</label>
        <select id="speculate" name="speculate">
          <option value="auto" selected={defaults.speculate === 'auto'}>
            auto (where it pays)
          </option>
          <option value="off" selected={defaults.speculate === false}>
            off
          </option>
          <option value="on" selected={defaults.speculate === true}>
            on
          </option>
        </select>
      </div>
      {/* Last: a setting few runs change, which must not move the settings everyone uses (or the tab order to them). */}
      <PrivateDetect kinds={defaults.privateDetectKinds} />
      <ConstraintInputs />
      <div class="wide">
        <button type="submit">{props.compare ? 'Compare' : 'Generate'}</button>
      </div>
    </form>
  );
}

/**
 * The output's constraint, folded away (few runs use one): at most one of the four may be filled; blank = none.
 * The edge holds it on every token, the cloud's included (docs/api.md, Constrained output).
 */
function ConstraintInputs() {
  const boxes: [string, string, string][] = [
    ['json_schema', 'JSON schema', '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}'],
    ['grammar', 'Grammar (xgrammar EBNF or llama.cpp GBNF)', 'root ::= "yes" | "no"'],
    ['regex', 'Regular expression', '[0-9]{3}-[a-z]+'],
    ['choice', 'Choices, one a line', 'A\nB\nC'],
  ];
  return (
    <details class="constraint" data-testid="constraint">
      <summary>Constrain the output</summary>
      {boxes.map(([name, label, placeholder]) => (
        <div>
          <label for={name}>{label}</label>
          <textarea id={name} name={name} rows={2} placeholder={placeholder}></textarea>
        </div>
      ))}
    </details>
  );
}

/**
 * The three optional budgets, one grid cell each like the other controls; blank = unset. Any one set
 * moves the cut on the router's scores to hold it instead of routing at a fixed τ.
 */
function BudgetInputs(props: { budget: RouteBudget }) {
  const { budget } = props;
  const inputs: [string, string, string, number | undefined, Record<string, string>][] = [
    [
      'route_share',
      'Routed share budget',
      'e.g. 0.10: one token in ten to the cloud; the cut moves to hold it',
      budget.routeShare,
      { min: '0', max: '1', step: '0.01' },
    ],
    ['route_tokens_per_minute', 'Cloud tokens per minute', 'for this box, all runs together', budget.routeTokensPerMinute, { min: '1', step: '1' }],
    ['route_wait_ms', 'Wait per token budget (ms)', 'fewer tokens routed as the round trip grows', budget.routeWaitMs, { min: '1', step: '1' }],
  ];
  return (
    <>
      {inputs.map(([name, label, hint, value, range]) => (
        <div>
          <label for={name}>{label}</label>
          <input
            id={name}
            name={name}
            type="number"
            value={value === undefined ? '' : String(value)}
            placeholder="blank = unset"
            aria-describedby={`${name}-help`}
            {...range}
          />
          <small id={`${name}-help`} class="legend">
            {hint}
          </small>
        </div>
      ))}
    </>
  );
}

/**
 * After Generate or Compare, the new run (or the error) is scrolled to when it is not already in sight: on
 * a phone the form fills the screen and the result would start below the fold, so nothing seemed to happen.
 * In sight = its top and a few lines under it (6rem) showing; a desktop that shows them does not jump. Only
 * the form's swap into #runs counts: each token streamed into a panel raises the same event, bubbling up here.
 */
const REVEAL_NEW_RUN = [
  'const run = this.firstElementChild;',
  'if (event.target !== this || !run) return;',
  'const top = run.getBoundingClientRect().top;',
  'if (top >= 0 && top <= innerHeight - 6 * parseFloat(getComputedStyle(document.documentElement).fontSize)) return;',
  "run.scrollIntoView({ block: 'start', behavior: matchMedia('(prefers-reduced-motion: reduce)').matches ? 'auto' : 'smooth' });",
].join(' ');

/** `chat`: the edge's pack has a chat template, so the header offers the chat page too. */
export function GeneratePage(props: { defaults: FormDefaults; compare: boolean; chat?: boolean }) {
  return (
    <Layout title={props.compare ? 'Compare · Edge token router' : 'Edge token router'} chat={props.chat}>
      <Controls defaults={props.defaults} action={props.compare ? '/compare' : '/runs'} compare={props.compare} />
      <p class="legend">
        Tokens in <span class="tok-llm">red</span> came from the cloud model; <span class="tok-fallback">underlined</span> ones were routed but the cloud was
        unreachable, so the edge model chose them. Tap or click a token for its router score and timings; the bars under the text show every token's score
        against τ.
      </p>
      <section id="runs" class="runs" aria-live="polite" hx-on--after-swap={REVEAL_NEW_RUN}></section>
      {/* Below the runs: reference for whoever asks, which must not push a new run below the fold on a desktop. */}
      <p class="runs-on">The edge model runs on onnxruntime with the {props.defaults.executionProviders.join(', then ')} execution provider.</p>
      <RouterAbout router={props.defaults.router} />
      <script type="module" src="/assets/private-marks.js"></script>
    </Layout>
  );
}
