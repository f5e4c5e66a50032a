/** @jsxImportSource hono/jsx */
/**
 * The controls that keep text away from the cloud, shared by the Generate and Chat pages. Mark private is
 * two pieces placed where each page has room, tied to a text box by one id: `MarkControls` (a kind and the
 * button) and `MarkedList` (the hidden `private_spans` field, the marked texts as chips, a note); the text box
 * names them with `data-private-marks`, and private-marks.js does the work in the browser. `PrivateDetect`
 * offers the detector kinds a request may add (`private_detect`), only where the edge has a detector.
 */

/** What a mark can say it is; its placeholder is the kind in capitals (`[NAME_1]`), `private` when it says nothing more. */
export const MARK_KINDS = ['private', 'name', 'email', 'phone', 'number'] as const;

const HINT =
  'Select a name or a number in the text and mark it: the cloud reads a placeholder such as [NAME_1] instead, and the edge puts the text back in the answer.';

/** The text box's attribute that ties it to the controls and list of id `id`. */
export const marksFor = (id: string) => ({ 'data-private-marks': id });

export function MarkControls(props: { id: string }) {
  const { id } = props;
  return (
    <span class="private-row" data-testid="mark-controls">
      <label for={`${id}-kind`} class="visually-hidden">
        Kind of private text
      </label>
      <select id={`${id}-kind`}>
        {MARK_KINDS.map((kind) => (
          <option value={kind}>{kind}</option>
        ))}
      </select>
      <button id={`${id}-mark`} type="button" class="secondary" title={HINT} aria-describedby={`${id}-hint`}>
        Mark private
      </button>
      <span id={`${id}-hint`} class="visually-hidden">
        {HINT}
      </span>
    </span>
  );
}

export function MarkedList(props: { id: string }) {
  const { id } = props;
  return (
    <div class="private-marks" data-testid="marked-list">
      <input type="hidden" id={`${id}-spans`} name="private_spans" value="" />
      <ul id={`${id}-list`} class="private-chips" aria-label="Marked private" hidden></ul>
      <small id={`${id}-note`} class="legend private-note" aria-live="polite"></small>
    </div>
  );
}

/** Checkboxes for the kinds the edge's detector finds, to hide on top of those it hides always (--private-detect); nothing when it has none. */
export function PrivateDetect(props: { kinds: readonly string[] }) {
  if (props.kinds.length === 0) return null;
  return (
    <fieldset data-testid="private-detect">
      <legend>Also hide what the edge finds</legend>
      {props.kinds.map((kind) => (
        <label>
          <input type="checkbox" name="private_detect" value={kind} /> {kind}
        </label>
      ))}
    </fieldset>
  );
}
