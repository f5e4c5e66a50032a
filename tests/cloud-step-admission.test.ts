/**
 * The shim's admission control with a clock that moves only when told: the slot limit, the FIFO, the moving
 * average of the backend time, the at-once and the timed refusals (exact times), cancellation, and the batch
 * lane the Score calls take turns in (steps first, never a step's last slot).
 */
import { describe, expect, test } from 'bun:test';
import { BATCH_PATIENCE_MS } from '../src/cloud/admission/batch-turns.ts';
import { StepAdmission, type AdmissionSlot } from '../src/cloud/admission/step-admission.ts';
import { ManualClock } from './helpers/manual-clock.ts';

const never = new AbortController().signal;

/** A slot, or a failed test. */
function slotOf(outcome: AdmissionSlot | 'overloaded'): AdmissionSlot {
  if (outcome === 'overloaded') throw new Error('refused as overloaded');
  return outcome;
}

/** Runs one step of `ms` through the admission at the clock's time, to feed its average. */
async function runStep(admission: StepAdmission, clock: ManualClock, ms: number): Promise<void> {
  const slot = slotOf(await admission.acquire(10_000, never));
  await clock.advanceTo(clock.time + ms);
  slot.release(true);
}

describe('step admission', () => {
  test('starts up to N at once, queues the rest in order, and hands each freed slot to the oldest waiter', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(2, clock);
    const a = slotOf(await admission.acquire(1_000, never));
    const b = slotOf(await admission.acquire(1_000, never));
    expect(admission.load()).toEqual({ stepsInFlight: 2, stepsQueued: 0, backendMs: 0, maxInFlight: 2 });
    const order: string[] = [];
    const c = admission.acquire(1_000, never).then((s) => (order.push('c'), slotOf(s)));
    const d = admission.acquire(1_000, never).then((s) => (order.push('d'), slotOf(s)));
    expect(admission.load()).toMatchObject({ stepsInFlight: 2, stepsQueued: 2 });
    await clock.advanceTo(40);
    // The load as b's call ended: its 40 ms in the average, itself still in flight.
    expect(b.release(true)).toEqual({ stepsInFlight: 2, stepsQueued: 2, backendMs: 40, maxInFlight: 2 });
    const cSlot = await c;
    expect(order).toEqual(['c']);
    expect(cSlot.waitedMs).toBe(40);
    expect(admission.load()).toMatchObject({ stepsInFlight: 2, stepsQueued: 1, backendMs: 40 });
    await clock.advanceTo(60);
    a.release(true);
    const dSlot = await d;
    expect(order).toEqual(['c', 'd']);
    expect(dSlot.waitedMs).toBe(60);
    // The average: 40, then 40 + 0.2 × (60 − 40).
    expect(admission.load()).toEqual({ stepsInFlight: 2, stepsQueued: 0, backendMs: 44, maxInFlight: 2 });
    cSlot.release(false);
    dSlot.release(true);
    dSlot.release(true);
    // A failed call does not feed the average; a second release changes nothing. d held its slot 0 ms.
    expect(admission.load()).toEqual({ stepsInFlight: 0, stepsQueued: 0, backendMs: 35.2, maxInFlight: 2 });
  });

  test('a step whose predicted start (position × backend time / N) is past its latest start is refused at once', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(2, clock);
    await runStep(admission, clock, 300);
    const busy = [slotOf(await admission.acquire(1_000, never)), slotOf(await admission.acquire(1_000, never))];
    // Deadline 1000, backend 300: the latest start is 700. Position 1 → 150, … position 4 → 600, position 5 → 750.
    expect(admission.latestStartMs(1_000)).toBe(700);
    const waiting = [1, 2, 3, 4].map(() => admission.acquire(1_000, never));
    expect(admission.load().stepsQueued).toBe(4);
    expect(await admission.acquire(1_000, never)).toBe('overloaded');
    expect(admission.overloaded).toBe(1);
    expect(admission.load().stepsQueued).toBe(4);
    // A longer deadline lets it queue: position 5 → 750 ≤ 2000 − 300.
    void admission.acquire(2_000, never);
    expect(admission.load().stepsQueued).toBe(5);
    for (const slot of busy) slot.release(true);
    // The two oldest waiters take the freed slots.
    expect((await Promise.all(waiting.slice(0, 2))).map((s) => slotOf(s).waitedMs)).toEqual([0, 0]);
    expect(admission.load()).toMatchObject({ stepsInFlight: 2, stepsQueued: 3 });
  });

  test('a waiting step is refused when it is still waiting at its latest start; the steps behind it move up', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(1, clock);
    await runStep(admission, clock, 100);
    const start = clock.time;
    const held = slotOf(await admission.acquire(1_000, never));
    // Predicted 100 ≤ 1000 − 100: it waits, with a refusal armed at 900.
    const first = admission.acquire(1_000, never);
    const second = admission.acquire(5_000, never);
    let outcome: unknown;
    void first.then((o) => (outcome = o));
    await clock.advanceTo(start + 899);
    expect(outcome).toBeUndefined();
    await clock.advanceTo(start + 900);
    expect(outcome).toBe('overloaded');
    expect(admission.load()).toMatchObject({ stepsInFlight: 1, stepsQueued: 1 });
    held.release(true);
    expect(slotOf(await second).waitedMs).toBe(900);
    expect(admission.overloaded).toBe(1);
  });

  test('before any backend time is known, a waiting step keeps a tenth of its deadline for the way back', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(1, clock);
    const held = slotOf(await admission.acquire(500, never));
    expect(admission.latestStartMs(500)).toBe(450);
    const waiting = admission.acquire(500, never);
    await clock.advanceTo(450);
    expect(await waiting).toBe('overloaded');
    held.release(true);
    expect(admission.load()).toEqual({ stepsInFlight: 0, stepsQueued: 0, backendMs: 450, maxInFlight: 1 });
  });

  test('a freed slot goes to the oldest waiter that can still start in time by the average as it now stands', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(1, clock);
    // Nothing measured yet: both may wait (latest starts 630 and 4500).
    const held = slotOf(await admission.acquire(10_000, never));
    const short = admission.acquire(700, never);
    const long = admission.acquire(5_000, never);
    await clock.advanceTo(400);
    // The first measurement, 400 ms: the short one would have had to start by 700 − 400 = 300.
    expect(held.release(true)).toMatchObject({ backendMs: 400 });
    expect(await short).toBe('overloaded');
    expect(slotOf(await long).waitedMs).toBe(400);
    expect(admission.load()).toEqual({ stepsInFlight: 1, stepsQueued: 0, backendMs: 400, maxInFlight: 1 });
    expect(clock.timers).toHaveLength(0);
  });

  test('work nobody waits for (an extend) takes only a slot free now: never one a step waits for, and no refusal counted', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(1, clock);
    const ahead = admission.tryAcquire(never)!;
    expect(ahead.waitedMs).toBe(0);
    expect(admission.tryAcquire(never)).toBeUndefined();
    const step = admission.acquire(10_000, never);
    ahead.release(false);
    const stepSlot = slotOf(await step);
    // A step is waiting or running: nothing ahead of it.
    expect(admission.tryAcquire(never)).toBeUndefined();
    stepSlot.release(true);
    const aborted = new AbortController();
    aborted.abort();
    expect(admission.tryAcquire(aborted.signal)).toBeUndefined();
    expect(admission.tryAcquire(never)).toBeDefined();
    expect(admission.overloaded).toBe(0);
  });

  test('a waiting step whose session ends leaves the queue with the reason; N must be a positive integer', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(1, clock);
    const held = slotOf(await admission.acquire(1_000, never));
    const controller = new AbortController();
    const waiting = admission.acquire(1_000, controller.signal);
    const behind = admission.acquire(1_000, never);
    controller.abort(new Error('the edge cancelled the stream'));
    await expect(waiting).rejects.toThrow('the edge cancelled the stream');
    expect(admission.load().stepsQueued).toBe(1);
    held.release(true);
    expect(slotOf(await behind).waitedMs).toBe(0);
    expect(clock.timers).toHaveLength(0);
    await expect(admission.acquire(1_000, controller.signal)).rejects.toThrow('the edge cancelled the stream');
    for (const n of [0, -1, 1.5, Number.NaN]) expect(() => new StepAdmission(n, clock)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

/** Whether a promise has settled once pending callbacks ran. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await Bun.sleep(0);
  return done;
}

describe('batch turns (Score work) beside the steps', () => {
  test('a turn never takes the last free slot: a step always finds one while batch work runs', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(3, clock);
    // No step has run yet: the steps are quiet, and two turns leave the third slot free.
    const first = await admission.acquireBatch(never);
    const second = await admission.acquireBatch(never);
    const third = admission.acquireBatch(never);
    expect(await settled(third)).toBe(false);
    expect(admission.batchLoad()).toEqual({ held: 2, waiting: 1, granted: 2, stepsBesideBatch: 0 });
    const step = slotOf(await admission.acquire(1_000, never));
    expect(step.waitedMs).toBe(0);
    expect(admission.batchLoad().stepsBesideBatch).toBe(1);
    // A turn ends: the waiting one would take the last slot beside the step, even out of patience.
    first();
    await clock.advanceTo(BATCH_PATIENCE_MS);
    expect(await settled(third)).toBe(false);
    step.release(true);
    (await third)();
    second();
    expect(admission.batchLoad()).toEqual({ held: 0, waiting: 0, granted: 3, stepsBesideBatch: 1 });
    expect(admission.load()).toMatchObject({ stepsInFlight: 0, stepsQueued: 0 });
  });

  test('a turn starts once no step has run for one step time; a step arriving in the gap goes first', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(8, clock);
    await runStep(admission, clock, 10);
    // The step ended at 10 and steps take 10 ms: a turn asked for now waits for the quiet at 20.
    const turn = admission.acquireBatch(never);
    await clock.advanceTo(15);
    expect(await settled(turn)).toBe(false);
    // A generation's next step arrives in the gap: it runs, and the quiet starts again when it ends.
    const step = slotOf(await admission.acquire(1_000, never));
    expect(step.waitedMs).toBe(0);
    await clock.advanceTo(25);
    step.release(true);
    await clock.advanceTo(34);
    expect(await settled(turn)).toBe(false);
    await clock.advanceTo(35);
    expect(await settled(turn)).toBe(true);
    (await turn)();
    expect(admission.batchLoad()).toEqual({ held: 0, waiting: 0, granted: 1, stepsBesideBatch: 0 });
  });

  test('steps that never pause: a turn starts beside them once it has waited BATCH_PATIENCE_MS', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(8, clock);
    let running = slotOf(await admission.acquire(1_000, never));
    const turn = admission.acquireBatch(never);
    // A new step starts before each ends: one is always in flight.
    for (let t = 20; t < BATCH_PATIENCE_MS; t += 20) {
      await clock.advanceTo(t);
      const next = slotOf(await admission.acquire(1_000, never));
      running.release(true);
      running = next;
      expect(await settled(turn)).toBe(false);
    }
    await clock.advanceTo(BATCH_PATIENCE_MS);
    expect(await settled(turn)).toBe(true);
    expect(admission.load().stepsInFlight).toBe(1);
    (await turn)();
    running.release(true);
  });

  test('a freed slot goes to a waiting step before any waiting turn, and no turn starts while a step waits', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(2, clock);
    const turn = await admission.acquireBatch(never);
    const running = slotOf(await admission.acquire(1_000, never));
    // Both slots taken (one by the turn): the next step waits, and so does the next turn, behind it.
    const waitingStep = admission.acquire(1_000, never);
    const waitingTurn = admission.acquireBatch(never);
    expect(admission.load()).toMatchObject({ stepsInFlight: 1, stepsQueued: 1 });
    const order: string[] = [];
    void waitingStep.then(() => order.push('step'));
    void waitingTurn.then(() => order.push('turn'));
    turn();
    await Bun.sleep(0);
    expect(order).toEqual(['step']);
    const second = slotOf(await waitingStep);
    running.release(true);
    // One step still runs: on two slots a turn beside it would take the last one, patience or not.
    await clock.advanceTo(BATCH_PATIENCE_MS * 2);
    expect(await settled(waitingTurn)).toBe(false);
    // Out of patience, it starts as soon as the slot rule allows.
    second.release(true);
    expect(await settled(waitingTurn)).toBe(true);
    expect(order).toEqual(['step', 'turn']);
  });

  test('on a one-slot shim a turn runs only when nothing else does; a waiting turn leaves with its reason', async () => {
    const clock = new ManualClock();
    const admission = new StepAdmission(1, clock);
    const step = slotOf(await admission.acquire(1_000, never));
    const controller = new AbortController();
    const cancelled = admission.acquireBatch(controller.signal);
    const next = admission.acquireBatch(never);
    controller.abort(new Error('the tool cancelled the call'));
    await expect(cancelled).rejects.toThrow('the tool cancelled the call');
    expect(admission.batchLoad().waiting).toBe(1);
    await clock.advanceTo(4);
    step.release(true);
    await clock.advanceTo(8);
    const release = await next;
    // The turn holds the only slot: a step arriving now waits for it (for one chunk), then goes first.
    const behind = admission.acquire(1_000, never);
    const turnBehind = admission.acquireBatch(never);
    expect(admission.load().stepsQueued).toBe(1);
    await clock.advanceTo(13);
    release();
    expect(slotOf(await behind).waitedMs).toBe(5);
    expect(await settled(turnBehind)).toBe(false);
    await expect(admission.acquireBatch(controller.signal)).rejects.toThrow('the tool cancelled the call');
  });
});
