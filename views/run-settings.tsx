/** @jsxImportSource hono/jsx */
/**
 * The controls a run is asked with, shared by the Generate and Chat pages: τ, the mode, the length and the
 * temperature. Each takes the id its page gives it (`chat-` on the chat page), so one page's labels never
 * point at the other's inputs.
 */

export function ThresholdSlider(props: { id: string; threshold: number; help?: string }) {
  const { id } = props;
  return (
    <div>
      <label for={id}>
        Threshold τ:{' '}
        <output id={`${id}-value`} for={id}>
          {props.threshold.toFixed(2)}
        </output>
      </label>
      <input
        id={id}
        name="threshold"
        type="range"
        min="0"
        max="1"
        step="0.01"
        value={String(props.threshold)}
        oninput={`document.getElementById('${id}-value').value = Number(this.value).toFixed(2)`}
        {...(props.help ? { 'aria-describedby': `${id}-help` } : {})}
      />
      {props.help ? (
        <small id={`${id}-help`} class="legend">
          {props.help}
        </small>
      ) : null}
    </div>
  );
}

/** joint, small_only or llm_only; `explained` adds what the two alone modes mean. */
export function ModeChoice(props: { explained?: boolean }) {
  const hint = (text: string) => (props.explained ? <small class="legend">{text}</small> : null);
  return (
    <fieldset>
      <legend>Mode</legend>
      <label>
        <input type="radio" name="mode" value="joint" checked /> joint
      </label>
      <label>
        <input type="radio" name="mode" value="small_only" /> small_only {hint('edge model alone')}
      </label>
      <label>
        <input type="radio" name="mode" value="llm_only" /> llm_only {hint('cloud model alone')}
      </label>
    </fieldset>
  );
}

export function MaxNewTokensInput(props: { id: string; value: number; limit: number }) {
  return (
    <div>
      <label for={props.id}>Max new tokens</label>
      <input id={props.id} name="max_new_tokens" type="number" min="1" max={String(props.limit)} value={String(props.value)} />
    </div>
  );
}

export function TemperatureInput(props: { id: string }) {
  return (
    <div>
      <label for={props.id}>Temperature</label>
      <input id={props.id} name="temperature" type="number" min="0" max="5" step="0.1" value="0" />
    </div>
  );
}
