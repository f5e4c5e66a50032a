/**
 * A clock that moves only when a test moves it, with timers: what the edge's health probe (ProbeClock) and
 * the shim's step admission (AdmissionClock) take, so their schedules are checked at exact times.
 *
 * @example
 * const clock = new ManualClock();
 * clock.setTimeout(() => fired.push(clock.now()), 100);
 * await clock.advanceTo(150); // runs the timer at 100, then stands at 150
 * await clock.fireNext(); // or: jumps to the earliest timer and runs it
 */
export class ManualClock {
  time = 0;
  readonly timers: { at: number; fn: () => void }[] = [];

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const timer = { at: this.time + ms, fn };
    this.timers.push(timer);
    return timer;
  }

  clearTimeout(timer: unknown): void {
    const i = this.timers.indexOf(timer as (typeof this.timers)[number]);
    if (i >= 0) this.timers.splice(i, 1);
  }

  /** Moves the clock to `time`, running the timers due by then in order; then lets their promises settle. */
  async advanceTo(time: number): Promise<void> {
    this.timers.sort((a, b) => a.at - b.at);
    while (this.timers[0] && this.timers[0].at <= time) {
      const timer = this.timers.shift()!;
      this.time = timer.at;
      timer.fn();
    }
    this.time = time;
    await Bun.sleep(0);
  }

  /** Jumps to the earliest timer and runs it; then lets its promises settle. */
  async fireNext(): Promise<void> {
    this.timers.sort((a, b) => a.at - b.at);
    const timer = this.timers.shift();
    if (!timer) throw new Error('no timer is armed');
    this.time = timer.at;
    timer.fn();
    await Bun.sleep(0);
  }
}
