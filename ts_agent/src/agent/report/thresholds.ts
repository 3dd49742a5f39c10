/**
 * Thresholds for reading a GRPO training curve, written once for both languages: the report's
 * attribution table (attribution.ts) and the sidecar's live RunWarnings (py_trainer worker's
 * CurveWatch) use the same numbers.
 *
 * This file is the source of truth. src/parity/vectors.ts writes CURVE_THRESHOLDS to
 * py_trainer/py_trainer/curve_thresholds.json (pretty, sorted keys), which
 * py_trainer/py_trainer/curve_thresholds.py loads; `make parity` fails when that checked-in JSON
 * is not what this file produces, or when the Python constants differ. Keys are snake_case so the
 * JSON reads the same from both sides. Heuristics for reading curves, not tests.
 */

/** The KL spike rule, written once here and ported name for name to py_trainer's train_grpo.py
 *  (kl_spike_level, used by the live CurveWatch): the local level a step's KL is judged against is
 *  the median of the KL of the previous `window` steps (the upper median for an even count, as
 *  sorted(...)[len // 2]); null with fewer than 3 previous steps. */
export function klLocalLevel(previous: ReadonlyArray<number>, window: number): number | null {
  const recent = previous.slice(Math.max(0, previous.length - window));
  if (recent.length < 3) return null;
  const sorted = [...recent].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** A KL spike at a step: its KL is over kl_spike_factor x the local level (klLocalLevel, floored
 *  at 1e-6 so a level of 0 does not make every KL a spike) and over kl_spike_min. */
export function isKlSpike(kl: number, previous: ReadonlyArray<number>, t: Readonly<CurveThresholds> = CURVE_THRESHOLDS): boolean {
  const level = klLocalLevel(previous, t.kl_spike_window);
  return level !== null && kl > t.kl_spike_min && kl > t.kl_spike_factor * Math.max(level, 0.000001);
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
   *  of the previous kl_spike_window steps; a step with fewer than 3 before it is not judged)... */
  kl_spike_factor: number;
  /** ...and this absolute floor (nats/token), so noise around ~0 is not a spike. */
  kl_spike_min: number;
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
