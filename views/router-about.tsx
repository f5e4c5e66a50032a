/** @jsxImportSource hono/jsx */
/**
 * The about box: which router the edge serves and, for a trained one, what `router train` measured on
 * held-out documents against the routers that could serve instead (the built-in top-1 probability, the
 * entropy, random). Folded under a native <details>: few readers open it, and it must not push the form down.
 * Where the trained router does not beat the built-in one, the verdict says so first, with the flag that serves it.
 */
import type { ViewFreeRun, ViewHeldOutReport, ViewRouterAbout } from './view-model.ts';

const METHODS = [
  ['router', 'trained'],
  ['top1', 'top-1 (built-in)'],
  ['entropy', 'entropy'],
  ['random', 'random'],
] as const;

const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : '–');
const run = (r: ViewFreeRun) => (Number.isFinite(r.pplCloud) ? `${r.pplCloud.toFixed(2)} (rep4 ${r.rep4.toFixed(3)})` : '–');

function Report(props: { report: ViewHeldOutReport }) {
  const r = props.report;
  return (
    <>
      <p class={r.beatsTop1 ? 'about-verdict' : 'about-verdict about-loses'} data-testid="router-verdict">
        {r.verdict}
      </p>
      <table class="about-table">
        <caption>
          Teacher forcing on {r.documents} held-out {r.noun}s ({r.positions} positions): share of the edge→cloud gap recovered
        </caption>
        <thead>
          <tr>
            <th scope="col">routed</th>
            {METHODS.map(([, label]) => (
              <th scope="col">{label}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {r.teacherForced.map((row) => (
            <tr>
              <th scope="row">{pct(row.share)}</th>
              {METHODS.map(([key]) => (
                <td>{pct(row[key])}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      {r.freeRunning.atShare.length ? (
        <table class="about-table">
          <caption>
            Free running from {r.freeRunning.prompts} held-out prompts ({r.freeRunning.maxNewTokens} tokens,{' '}
            {r.freeRunning.temperature ? `sampled at temperature ${r.freeRunning.temperature}` : 'greedy'}): the cloud's perplexity of the output (lower is
            better), at matched routed shares
          </caption>
          <thead>
            <tr>
              <th scope="col">routed</th>
              {METHODS.map(([, label]) => (
                <th scope="col">{label}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {r.freeRunning.atShare.map((row) => (
              <tr>
                <th scope="row">{pct(row.share)}</th>
                {METHODS.map(([key]) => (
                  <td>{run(row[key])}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {r.freeRunning.greedyLoopCheck.length ? (
        <p class="about-loops" data-testid="router-loop-check">
          Loops, decoding greedily{r.freeRunning.greedyLoopPrompts ? ` on ${r.freeRunning.greedyLoopPrompts} prompts` : ''} (rep4, trained against random at the
          same share):{' '}
          {r.freeRunning.greedyLoopCheck
            .map((row) => `${pct(row.share)}: ${row.router.rep4.toFixed(3)} / ${row.random.rep4.toFixed(3)} [${pct(row.router.routedShare)}]`)
            .join('; ')}
        </p>
      ) : null}
    </>
  );
}

export function RouterAbout(props: { router: ViewRouterAbout }) {
  const { router } = props;
  const builtin = router.name.startsWith('builtin:');
  return (
    <details class="router-about" data-testid="router-about">
      <summary>About this router</summary>
      <p>
        {builtin
          ? "The built-in router: the edge model's own top-1 probability (no trained pack)."
          : `The trained router ${router.name.replace(/^onnx:/, '')}, default τ ${router.defaultThreshold}.`}
      </p>
      {router.report ? (
        <Report report={router.report} />
      ) : builtin ? null : (
        <p class="legend">This pack holds no held-out report: it was trained before `router train` measured one, or with --report-documents 0.</p>
      )}
    </details>
  );
}
