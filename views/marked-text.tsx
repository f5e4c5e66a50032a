/** @jsxImportSource hono/jsx */
/**
 * A text with its private values highlighted: every occurrence of each value, as the edge treats every
 * occurrence as private (a prompt's marked name wherever it appears, a chat message's in later turns too).
 *
 * @example
 * privateSegments('Lily met Lily', ['Lily']);
 * // [{ text: 'Lily', private: true }, { text: ' met ', private: false }, { text: 'Lily', private: true }]
 */

export interface TextSegment {
  text: string;
  private: boolean;
}

/** `text` cut where private values start and end; overlapping or touching occurrences are one private segment. */
export function privateSegments(text: string, values: readonly string[]): TextSegment[] {
  const ranges: [number, number][] = [];
  for (const value of new Set(values.map((v) => v.trim()))) {
    if (value === '') continue;
    for (let at = text.indexOf(value); at >= 0; at = text.indexOf(value, at + 1)) ranges.push([at, at + value.length]);
  }
  ranges.sort((a, b) => a[0] - b[0]);
  const segments: TextSegment[] = [];
  let done = 0;
  for (const [start, end] of ranges) {
    if (start > done) segments.push({ text: text.slice(done, start), private: false });
    const last = segments[segments.length - 1];
    if (start <= done && last?.private) {
      last.text += text.slice(done, Math.max(done, end));
    } else segments.push({ text: text.slice(Math.max(start, done), end), private: true });
    done = Math.max(done, end);
  }
  if (done < text.length || segments.length === 0) segments.push({ text: text.slice(done), private: false });
  return segments;
}

export function MarkedText(props: { text: string; values?: readonly string[] }) {
  if (!props.values?.length) return <>{props.text}</>;
  return (
    <>
      {privateSegments(props.text, props.values).map((s) =>
        s.private ? (
          <mark class="private" title="private: the cloud reads a placeholder">
            {s.text}
          </mark>
        ) : (
          s.text
        ),
      )}
    </>
  );
}
