/**
 * Stands in for another CPU's onnxruntime kernels: every `hidden_states` output of one model pack gets a
 * seeded relative noise of at most ±`relative` (1e-6 by default, about 8 float32 ulps, the order of the
 * differences between AVX2, AVX-512 and NEON paths after a few layers). Logits are left alone, so greedy
 * text is unchanged; what moves is everything the router reads, is trained on and decides. A test that
 * passes with it on does not depend on one machine's last bits.
 *
 * It wraps `DecoderModel.prototype.forward`, through which every forward pass of every sequence goes
 * (teacher forcing, on-policy rollouts, the decoder loop), so the code under test is not touched.
 *
 * @example
 * const perturbation = perturbHiddenStates({ packDir: DEMO.edgePack, seed: 1 });
 * try {
 *   await trainRouter({ ...options, edgeModel: DEMO.edgePack });
 * } finally {
 *   perturbation.restore();
 * }
 */
import { resolve } from 'node:path';
import { DecoderModel } from '../../src/shared/model/decoder-model.ts';
import { seededRandom } from '../../src/shared/seeded-random.ts';

export interface HiddenStatePerturbation {
  /** How many hidden-state values were changed so far (a check that the wrapper saw the passes). */
  readonly perturbedValues: number;
  /** The largest |change| / |value| applied so far. */
  readonly largestRelativeChange: number;
  /** Puts the original `forward` back. */
  restore(): void;
}

export interface PerturbationOptions {
  /** The pack whose `hidden_states` are perturbed (other packs, such as the cloud model, are left alone). */
  packDir: string;
  seed: number;
  /** The largest relative change of one value (default 1e-6). */
  relative?: number;
}

export function perturbHiddenStates(options: PerturbationOptions): HiddenStatePerturbation {
  const relative = options.relative ?? 1e-6;
  const packDir = resolve(options.packDir);
  const random = seededRandom(options.seed);
  const original = Object.getOwnPropertyDescriptor(DecoderModel.prototype, 'forward')!;
  const originalForward = DecoderModel.prototype.forward;
  const state = { perturbedValues: 0, largestRelativeChange: 0 };

  DecoderModel.prototype.forward = async function (this: DecoderModel, feeds, tokens) {
    const out = await originalForward.call(this, feeds, tokens);
    const hidden = out.hidden_states;
    if (this.pack.dir !== packDir || hidden === undefined) return out;
    if (!(hidden.data instanceof Float32Array)) throw new TypeError(`perturbHiddenStates handles float32 hidden_states only, got ${hidden.type}`);
    const values = hidden.data;
    for (let i = 0; i < values.length; i++) {
      const before = values[i]!;
      values[i] = before * (1 + (2 * random() - 1) * relative);
      if (before !== 0) state.largestRelativeChange = Math.max(state.largestRelativeChange, Math.abs(values[i]! - before) / Math.abs(before));
    }
    state.perturbedValues += values.length;
    return out;
  };

  return {
    get perturbedValues() {
      return state.perturbedValues;
    },
    get largestRelativeChange() {
      return state.largestRelativeChange;
    },
    restore() {
      Object.defineProperty(DecoderModel.prototype, 'forward', original);
    },
  };
}

/**
 * The perturbation a test file asks for through `PERTURB_HIDDEN_STATES=<seed>` (unset: none). Tests that
 * read it train and check their router from perturbed hidden states, e.g.
 * `PERTURB_HIDDEN_STATES=1 bun test tests/router-training.test.ts`.
 *
 * @example
 * const perturbation = perturbationFromEnv(DEMO.edgePack); // undefined unless PERTURB_HIDDEN_STATES is set
 */
export function perturbationFromEnv(packDir: string, env: Record<string, string | undefined> = process.env): HiddenStatePerturbation | undefined {
  const text = env.PERTURB_HIDDEN_STATES;
  if (text === undefined || text === '') return undefined;
  const seed = Number(text);
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`PERTURB_HIDDEN_STATES must be a seed (a whole number ≥ 0), got "${text}"`);
  return perturbHiddenStates({ packDir, seed });
}
