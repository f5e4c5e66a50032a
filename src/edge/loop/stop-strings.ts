/**
 * Streams text while watching for stop strings. Text that might be the beginning of a stop string is
 * held back until it is known not to be one, so the output never shows part of a stop string.
 *
 * @example
 * const s = new StopStringFilter(['\n\n']);
 * s.push('Hi\n');   // → { text: 'Hi', stopped: false }
 * s.push('\nBye');  // → { text: '', stopped: true }
 */
export class StopStringFilter {
  private pending = '';
  private done = false;

  constructor(private readonly stops: readonly string[]) {}

  /** Adds generated text; returns what may be shown now and whether a stop string was reached. */
  push(piece: string): { text: string; stopped: boolean } {
    if (this.done) return { text: '', stopped: true };
    this.pending += piece;
    let cut = -1;
    for (const s of this.stops) {
      const at = this.pending.indexOf(s);
      if (at !== -1 && (cut === -1 || at < cut)) cut = at;
    }
    if (cut !== -1) {
      this.done = true;
      const text = this.pending.slice(0, cut);
      this.pending = '';
      return { text, stopped: true };
    }
    const keep = this.longestStopPrefixSuffix();
    const text = this.pending.slice(0, this.pending.length - keep);
    this.pending = this.pending.slice(this.pending.length - keep);
    return { text, stopped: false };
  }

  /** Whatever is still held back, at the end of generation. */
  flush(): string {
    const text = this.done ? '' : this.pending;
    this.pending = '';
    return text;
  }

  /** Length of the longest suffix of the pending text that is a proper prefix of some stop string. */
  private longestStopPrefixSuffix(): number {
    let best = 0;
    for (const s of this.stops) {
      for (let n = Math.min(s.length - 1, this.pending.length); n > best; n--) {
        if (this.pending.endsWith(s.slice(0, n))) {
          best = n;
          break;
        }
      }
    }
    return best;
  }
}
