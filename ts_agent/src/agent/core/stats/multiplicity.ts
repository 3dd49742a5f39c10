/**
 * The statistics, several samples per task and many typologies: passAtK, Holm's adjustment, the cluster-robust SE of a mean.
 * Ported to py_trainer/py_trainer/core/stats/multiplicity.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

import { checkInteger, checkNumber, checkSample, fail } from "./errors.js";
import { mean, sumOf, sumSquaredDeviations } from "./descriptive.js";

/**
 * Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): the
 * probability that at least one of k samples drawn without replacement from n samples, c of them
 * correct, is correct: 1 - C(n-c, k) / C(n, k), computed as their stable product
 * 1 - prod_{i=n-c+1}^{n} (1 - k / i); 1 when n - c < k. Needs 1 <= k <= n, 0 <= c <= n.
 */
export function passAtK(n: number, c: number, k: number): number {
  checkInteger("n", n, 1);
  checkInteger("c", c, 0);
  checkInteger("k", k, 1);
  if (c > n) fail("out_of_range", `c (${c}) must be <= n (${n})`);
  if (k > n) fail("out_of_range", `k (${k}) must be <= n (${n})`);
  if (n - c < k) return 1;
  let prod = 1;
  for (let i = n - c + 1; i <= n; i++) prod *= 1 - k / i;
  return 1 - prod;
}

/**
 * Holm's (1979) step-down adjusted p-values, in the input order: sort ascending, p_(i) times
 * (m - i) for i = 0..m-1, running maximum, capped at 1 (statsmodels multipletests(method="holm")).
 */
export function holmAdjust(pvalues: ReadonlyArray<number>): number[] {
  if (pvalues.length === 0) fail("empty", "pvalues is empty");
  for (let i = 0; i < pvalues.length; i++) {
    checkNumber(`pvalues[${i}]`, pvalues[i]);
    if (pvalues[i] < 0 || pvalues[i] > 1) fail("out_of_range", `pvalues[${i}] must be in [0, 1], got ${pvalues[i]}`);
  }
  const m = pvalues.length;
  const order = pvalues.map((_, i) => i).sort((x, y) => (pvalues[x] < pvalues[y] ? -1 : pvalues[x] > pvalues[y] ? 1 : x - y));
  const out = new Array<number>(m);
  let running = 0;
  for (let r = 0; r < m; r++) {
    const v = (m - r) * pvalues[order[r]];
    if (v > running) running = v;
    out[order[r]] = running < 1 ? running : 1;
  }
  return out;
}

/** Result of clusteredMeanSE. */
export interface ClusteredMean {
  n: number;
  clusters: number;
  mean: number;
  /** cluster-robust SE of the mean (CR1, statsmodels' small-sample factor G / (G - 1)) */
  se: number;
  /** the usual sd / sqrt(n) */
  iidSe: number;
  /** (se / iidSe)^2; null when iidSe = 0 */
  designEffect: number | null;
}

/**
 * Mean of `values` with a cluster-robust SE, clusters given by `clusters[i]` (e.g. the narrative
 * template of task i; Miller 2024, "Adding Error Bars to Evals", arXiv 2411.00640):
 * se^2 = G / (G - 1) * sum_g (sum_{i in g} (x_i - mean))^2 / n^2, which is statsmodels'
 * OLS(x, 1).fit(cov_type="cluster") SE. Cluster sums run in order of first appearance. Needs
 * n >= 2 and at least 2 clusters.
 */
export function clusteredMeanSE(values: ReadonlyArray<number>, clusters: ReadonlyArray<string>): ClusteredMean {
  checkSample("values", values, 2);
  if (clusters.length !== values.length) fail("length_mismatch", `values has ${values.length} entries, clusters has ${clusters.length}`);
  for (let i = 0; i < clusters.length; i++) {
    if (typeof clusters[i] !== "string") fail("label_type", `clusters[${i}] must be a string, got ${typeof clusters[i]}`);
  }
  const n = values.length;
  const m = sumOf(values) / n;
  const sums = new Map<string, number>();
  for (let i = 0; i < n; i++) sums.set(clusters[i], (sums.get(clusters[i]) ?? 0) + (values[i] - m));
  const g = sums.size;
  if (g < 2) fail("too_few", `needs at least 2 clusters, got ${g}`);
  let ss = 0;
  for (const u of sums.values()) ss += u * u;
  const se = Math.sqrt(((g / (g - 1)) * ss) / (n * n));
  const iidSe = Math.sqrt(sumSquaredDeviations(values, m) / (n - 1)) / Math.sqrt(n);
  const ratio = se / iidSe;
  return { n, clusters: g, mean: m, se, iidSe, designEffect: iidSe > 0 ? ratio * ratio : null };
}
