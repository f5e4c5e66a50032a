import { seededRandom } from '../../shared/seeded-random.ts';

/**
 * The loop's seeded random stream with a way back: speculative positions draw from it, and a rejected
 * speculation rewinds it to the routed position so the next draws are those the loop without speculation
 * makes. Rewinding replays the generator (a few draws per speculative token), never stores its output.
 *
 * @example
 * const random = new ReplayableRandom(7);
 * const mark = random.draws; random.next(); random.rewind(mark);
 */
export class ReplayableRandom {
  private generator: () => number;
  draws = 0;

  constructor(private readonly seed: number) {
    this.generator = seededRandom(seed);
  }

  readonly next = (): number => {
    this.draws++;
    return this.generator();
  };

  rewind(draws: number): void {
    this.generator = seededRandom(this.seed);
    for (let i = 0; i < draws; i++) this.generator();
    this.draws = draws;
  }
}
