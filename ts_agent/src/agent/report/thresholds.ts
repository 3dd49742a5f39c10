/**
 * Thresholds for reading a GRPO training curve, written once for both languages: the report's
 * attribution table (attribution.ts) and the sidecar's live RunWarnings (py_trainer worker's
 * CurveWatch) use the same numbers.
 *
 * This file is the source of truth. src/parity/vectors.ts writes CURVE_THRESHOLDS to
 * py_trainer/py_trainer/core/curve_thresholds.json (pretty, sorted keys), which
 * py_trainer/py_trainer/core/curve_thresholds.py loads; `make parity` fails when that checked-in JSON
 * is not what this file produces, or when the Python constants differ. Keys are snake_case so the
 * JSON reads the same from both sides. Heuristics for reading curves, not tests.
 */

/** The KL spike rule, written once here and ported name for name to py_trainer's train_grpo.py
 *  (kl_local_level, used by the live CurveWatch): the local level a step's KL is judged against is
 *  the median of the KL of the previous `window` steps (the upper median for an even count, as
 *  sorted(...)[len // 2]); null before `window` steps (issue 44: the demo's KL rising from 0
 *  was "336.8x the median 0.0004" at step 14). */
export function klLocalLevel(previous: ReadonlyArray<number>, window: number): number | null {
  if (previous.length < window) return null;
  const sorted = previous.slice(previous.length - window).sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** The local spread: the median absolute deviation of the same window's KL from klLocalLevel
 *  (upper median); null when the level is. */
export function klLocalSpread(previous: ReadonlyArray<number>, window: number): number | null {
  const level = klLocalLevel(previous, window);
  if (level === null) return null;
  const dev = previous
    .slice(previous.length - window)
    .map((x) => Math.abs(x - level))
    .sort((a, b) => a - b);
  return dev[Math.floor(dev.length / 2)];
}

/** A KL spike at a step: with a full window before it, its KL is over kl_spike_factor x the local
 *  level floored at kl_spike_min (a ratio against a level near 0 is no spike) and over the level
 *  by more than kl_spike_mads x the local spread (the per-step noise of a KL near 0.1 is none). */
export function isKlSpike(kl: number, previous: ReadonlyArray<number>, t: Readonly<CurveThresholds> = CURVE_THRESHOLDS): boolean {
  const level = klLocalLevel(previous, t.kl_spike_window);
  const spread = klLocalSpread(previous, t.kl_spike_window);
  return level !== null && spread !== null && kl > t.kl_spike_factor * Math.max(level, t.kl_spike_min) && kl > level + t.kl_spike_mads * spread;
}

/** The curve thresholds; each field says what crosses it and why it matters. */
export interface CurveThresholds {
  /** completions/clipped_ratio at or above this (fraction): almost every completion hit
   *  max_completion_length, so rewards and lengths are unreliable. */
  clipped_ratio_warn: number;
  /** frac_reward_zero_std at or above this (fraction of groups): almost every group has
   *  identical rewards, so advantages are 0 and nothing is learned. */
  zero_std_warn: number;
  /** The sidecar warns after this many consecutive steps at or above zero_std_warn (steps). */
  zero_std_warn_steps: number;
  /** A step's rewards have no variance, up to float noise, when its batch-wide reward_std is at
   *  most this fraction of the reward's scale (max(|reward|, 1)): TRL counts a group as zero-std
   *  with torch.isclose at atol 1e-8, so a constant reward of 0.2 with float32 noise
   *  (reward_std 1.5e-8) logs frac_reward_zero_std 0.0. Such a step counts as all groups zero-std. */
  zero_std_rel_tol: number;
  /** A KL spike: a step whose KL exceeds this multiple of the recent local level (the median KL
   *  of the previous kl_spike_window steps; a step with fewer before it is not judged)... */
  kl_spike_factor: number;
  /** ...the level floored at this (nats/token), so a KL rising from ~0 is not a spike... */
  kl_spike_min: number;
  /** ...and exceeds the level by more than this many median absolute deviations of that window:
   *  the demo's own KL (seed 1, test/fixtures/demo-kl-seed1.json) reaches 11.8 at most among its
   *  steps over the factor (step 53: 0.59 on a median 0.0875, spread 0.043), lr 5e-3's KL ~6 is
   *  over 100. */
  kl_spike_mads: number;
  /** The local level's window (steps): against the whole run's median a KL that grows smoothly
   *  (0 -> 0.1) counted 22 spikes; against the last 10 steps a ramp has none, a jump still is one. */
  kl_spike_window: number;
  /** The sidecar reports at most one KL spike per this many steps (steps). */
  kl_spike_every: number;
}

export const CURVE_THRESHOLDS: Readonly<CurveThresholds> = Object.freeze({
  clipped_ratio_warn: 0.9,
  zero_std_warn: 0.9,
  zero_std_warn_steps: 5,
  zero_std_rel_tol: 1e-4,
  kl_spike_factor: 5,
  kl_spike_min: 0.05,
  kl_spike_mads: 20,
  kl_spike_window: 10,
  kl_spike_every: 10,
});

/**
 * The share of groups with no within-group reward variance: the sidecar's per-group count
 * (`frac_reward_zero_std_group`, py_trainer train_grpo.GroupZeroStd: each group's reward sd from
 * the rewards it computed, zero when <= 64 float32 epsilons x the batch's largest |reward|) when
 * the step logged it. For steps logged without it: 1 when the batch-wide reward_std is zero up to
 * float noise relative to the reward's scale (`zero_std_rel_tol`), else TRL's value. Null when no
 * metric was logged. The live warning (train_grpo.effective_zero_std) and the attribution use
 * this, never TRL's raw value alone.
 */
export function effectiveZeroStd(
  m: { frac_reward_zero_std?: number; frac_reward_zero_std_group?: number; reward_std?: number; reward?: number },
  t: Readonly<CurveThresholds> = CURVE_THRESHOLDS,
): number | null {
  const group = m.frac_reward_zero_std_group;
  if (group !== undefined && Number.isFinite(group)) return group;
  const std = m.reward_std;
  if (std !== undefined && Number.isFinite(std)) {
    const scale = Math.max(Math.abs(m.reward ?? 0), 1);
    if (std <= t.zero_std_rel_tol * scale) return 1;
  }
  const zs = m.frac_reward_zero_std;
  return zs === undefined || !Number.isFinite(zs) ? null : zs;
}

/** CURVE_THRESHOLDS as the checked-in JSON file: 2-space indent, keys sorted, trailing newline. */
export function formatCurveThresholds(t: Readonly<CurveThresholds> = CURVE_THRESHOLDS): string {
  const sorted = Object.fromEntries(Object.entries(t).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));
  return `${JSON.stringify(sorted, null, 2)}\n`;
}
