/**
 * GRPO's group-relative advantages, ported to py_trainer/py_trainer/core/advantage.py
 * (group_relative_advantage), checked by `make parity`.
 *
 * groupRelativeAdvantage reproduces TRL 1.16 GRPOTrainer._generate_and_score_completions
 * (multi_objective_aggregation="sum_then_normalize") in float64: group mean, sample std with
 * Bessel's correction (TRL's nanstd), NaN rewards left out of both and given advantage 0. Bad
 * input throws answer-text.ts's RewardInputError with the same kinds as the Python port.
 */
import { RewardInputError, type RewardErrorKind } from "./answer-text.js";

function fail(kind: RewardErrorKind, message: string): never {
  throw new RewardInputError(kind, message);
}

// ---------------------------------------------------------------------------------------------
// Advantages

/** How advantages are scaled: per-group std (GRPO), one batch std, or not at all (Dr. GRPO). */
export type AdvantageScale = "group" | "batch" | "none";

/**
 * GRPO advantages, as TRL 1.16's GRPOTrainer with scale_rewards = `scale`:
 * A_i = (r_i - mean_g) / (std + eps) where mean_g is the mean of i's group (consecutive blocks
 * of `groupSize`), std is the sample std (Bessel) of i's group ("group") or of the whole batch
 * ("batch"); "none" gives A_i = r_i - mean_g. Unscorable rewards (null or NaN) are left out of
 * every mean and std and get advantage 0; so does a whole group whose std is undefined (fewer
 * than 2 scorable rewards; for "batch", fewer than 2 in the batch). Default eps 1e-4 (TRL's).
 * As TRL's nan_to_num, an infinite advantage (only possible with eps = 0) becomes +-Number.MAX_VALUE.
 */
export function groupRelativeAdvantage(
  rewards: ReadonlyArray<number | null>,
  groupSize: number,
  options: { scale?: AdvantageScale; eps?: number } = {},
): number[] {
  if (rewards.length === 0) fail("empty", "rewards is empty");
  if (typeof groupSize !== "number" || !Number.isInteger(groupSize) || groupSize < 1) {
    fail("group_size", `groupSize must be a positive integer, got ${String(groupSize)}`);
  }
  if (rewards.length % groupSize !== 0) {
    fail("group_size", `groupSize ${groupSize} does not divide the ${rewards.length} rewards`);
  }
  const scale = options.scale ?? "group";
  if (scale !== "group" && scale !== "batch" && scale !== "none") {
    fail("bad_option", `scale must be "group", "batch" or "none", got ${String(scale)}`);
  }
  const eps = options.eps ?? 1e-4;
  if (typeof eps !== "number" || Number.isNaN(eps)) fail("nan", `eps must be a number, got ${String(eps)}`);
  if (!(eps >= 0 && eps < Infinity)) fail("out_of_range", `eps must be finite and >= 0, got ${eps}`);
  const r: number[] = [];
  for (let i = 0; i < rewards.length; i++) {
    const x = rewards[i];
    if (x === null || (typeof x === "number" && Number.isNaN(x))) r.push(NaN);
    else if (typeof x !== "number") fail("nan", `rewards[${i}] must be a number or null, got ${String(x)}`);
    else if (!Number.isFinite(x)) fail("out_of_range", `rewards[${i}] must be finite, got ${x}`);
    else r.push(x);
  }
  const groups = r.length / groupSize;
  const means: number[] = [];
  const stds: number[] = [];
  for (let g = 0; g < groups; g++) {
    const [m, s] = nanMeanStd(r, g * groupSize, (g + 1) * groupSize);
    means.push(m);
    stds.push(s);
  }
  const batchStd = scale === "batch" ? nanMeanStd(r, 0, r.length)[1] : NaN;
  const out: number[] = [];
  for (let i = 0; i < r.length; i++) {
    const g = Math.floor(i / groupSize);
    let a: number;
    if (scale === "none") a = r[i] - means[g];
    else a = (r[i] - means[g]) / ((scale === "batch" ? batchStd : stds[g]) + eps);
    out.push(nanToNum(a));
  }
  return out;
}

/** torch.nan_to_num(a, nan=0.0) as TRL applies it: NaN -> 0, +-Infinity -> +-largest finite. */
function nanToNum(a: number): number {
  if (Number.isNaN(a)) return 0;
  if (a === Infinity) return Number.MAX_VALUE;
  if (a === -Infinity) return -Number.MAX_VALUE;
  return a;
}

/** TRL's nanmean and nanstd over r[start, end): var = (ss / count) * (count / (count - 1)), NaN if count < 2. */
function nanMeanStd(r: ReadonlyArray<number>, start: number, end: number): [number, number] {
  let sum = 0;
  let count = 0;
  for (let i = start; i < end; i++) {
    if (!Number.isNaN(r[i])) {
      sum += r[i];
      count++;
    }
  }
  const m = count > 0 ? sum / count : NaN;
  if (count < 2) return [m, NaN];
  let ss = 0;
  for (let i = start; i < end; i++) {
    if (!Number.isNaN(r[i])) {
      const d = r[i] - m;
      ss += d * d;
    }
  }
  return [m, Math.sqrt((ss / count) * (count / (count - 1)))];
}
