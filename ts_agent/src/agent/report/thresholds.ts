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
  /** A KL spike: a step whose KL exceeds this multiple of the median KL... */
  kl_spike_factor: number;
  /** ...and this absolute floor (nats/token), so noise around ~0 is not a spike. */
  kl_spike_min: number;
  /** The sidecar reports at most one KL spike per this many steps (steps). */
  kl_spike_every: number;
}

export const CURVE_THRESHOLDS: Readonly<CurveThresholds> = Object.freeze({
  clipped_ratio_warn: 0.9,
  zero_std_warn: 0.9,
  zero_std_warn_steps: 5,
  kl_spike_factor: 5,
  kl_spike_min: 0.05,
  kl_spike_every: 10,
});

/** CURVE_THRESHOLDS as the checked-in JSON file: 2-space indent, keys sorted, trailing newline. */
export function formatCurveThresholds(t: Readonly<CurveThresholds> = CURVE_THRESHOLDS): string {
  const sorted = Object.fromEntries(Object.entries(t).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));
  return `${JSON.stringify(sorted, null, 2)}\n`;
}
