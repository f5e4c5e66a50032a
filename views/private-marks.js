/**
 * Mark private: each text box with `data-private-marks` (views/private-marks.tsx) is served by the controls
 * and list of that id. A selection in the box, marked with a kind, becomes a chip (its text, its kind, a
 * button that unmarks it) and a range in the hidden `private_spans` field, which the form sends (in code
 * points, private-spans.js). Edits to the box carry the marks along or drop the ones whose text was edited,
 * and say which were dropped; a box emptied (a chat message sent, chat.js) drops its marks without a word.
 * The chips' text is set as text, never as markup.
 */
import { addMark, followEdit, spansField } from './private-spans.js';

for (const box of document.querySelectorAll('[data-private-marks]')) watch(box);

function watch(box) {
  const id = box.dataset.privateMarks;
  const [field, kind, button, list, note] = ['spans', 'kind', 'mark', 'list', 'note'].map((part) => document.getElementById(`${id}-${part}`));
  if (!field || !kind || !button || !list || !note) return;
  let marks = [];
  let seen = box.value;

  const show = () => {
    field.value = spansField(box.value, marks);
    list.replaceChildren(...marks.map(chip));
    list.hidden = marks.length === 0;
  };
  const chip = (mark) => {
    const item = document.createElement('li');
    const text = document.createElement('mark');
    text.className = 'private';
    text.textContent = mark.text;
    const label = document.createElement('span');
    label.className = 'private-kind';
    label.textContent = mark.kind;
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'private-unmark';
    remove.textContent = '×';
    remove.setAttribute('aria-label', `Unmark “${mark.text}”`);
    remove.addEventListener('click', () => {
      marks = marks.filter((m) => m !== mark);
      note.textContent = '';
      show();
    });
    item.append(text, ' ', label, remove);
    return item;
  };
  /** Brings the marks up to the box's text; run on each edit, and before the form is sent. */
  const follow = () => {
    if (box.value === seen) return;
    const { marks: kept, dropped } = box.value === '' ? { marks: [], dropped: [] } : followEdit(seen, box.value, marks);
    seen = box.value;
    marks = kept;
    note.textContent =
      dropped.length === 0 ? '' : `Unmarked ${dropped.map((m) => `“${m.text}”`).join(', ')}: the marked text was edited. Mark it again if it is still private.`;
    show();
  };

  box.addEventListener('input', follow);
  // Capture, so the field is current before htmx reads the form (htmx listens on the form too).
  box.form?.addEventListener('submit', follow, true);
  button.addEventListener('click', () => {
    follow();
    const added = addMark(box.value, marks, box.selectionStart, box.selectionEnd, kind.value);
    note.textContent = added.error ?? '';
    marks = added.marks;
    show();
  });
  show();
}
