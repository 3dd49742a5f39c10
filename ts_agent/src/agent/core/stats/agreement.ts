/**
 * The statistics, agreement: Cohen's kappa, Kendall's tau-b, Fleiss' kappa, Kendall's W.
 * Ported to py_trainer/py_trainer/core/stats/agreement.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

import { checkInteger, checkNumber, fail } from "./errors.js";
import { erfc, SQRT1_2 } from "./elementary.js";
import { clampP } from "./distributions.js";
import { sortNumbers } from "./rng.js";
import { averageRanks, sumOf } from "./descriptive.js";

/** A rating label: all numbers or all strings within one call. */
export type Label = number | string;

/** Kappa weighting: "none" (plain), "linear" (Cicchetti-Allison), "quadratic" (Fleiss-Cohen). */
export type KappaWeights = "none" | "linear" | "quadratic";

/** Result of cohenKappa. Undefined quantities (expected agreement 1, zero null SE) are null. */
export interface CohenKappa {
  n: number;
  /** category order used for the table and for the weights */
  categories: Label[];
  weights: KappaWeights;
  /** weighted observed agreement */
  observedAgreement: number;
  /** weighted chance agreement from the margins */
  expectedAgreement: number;
  kappa: number | null;
  /** asymptotic SE (Fleiss, Cohen & Everitt 1969), as statsmodels' std_kappa */
  se: number | null;
  /** SE under kappa = 0, as statsmodels' std_kappa0 */
  se0: number | null;
  /** kappa / se0; null when se0 is 0 (a rater used a single category: no test against chance) */
  z: number | null;
  /** two-sided normal p for kappa = 0 */
  p: number | null;
}

function compareCodePoints(x: string, y: string): number {
  const xs = Array.from(x);
  const ys = Array.from(y);
  const n = Math.min(xs.length, ys.length);
  for (let i = 0; i < n; i++) {
    const cx = xs[i].codePointAt(0)!;
    const cy = ys[i].codePointAt(0)!;
    if (cx !== cy) return cx - cy;
  }
  return xs.length - ys.length;
}

function labelKind(name: string, x: unknown): "number" | "string" {
  if (typeof x === "string") return "string";
  if (typeof x === "number") {
    checkNumber(name, x);
    return "number";
  }
  if (x === null || x === undefined) fail("nan", `${name} is missing`);
  return fail("label_type", `${name} must be a number or a string, got ${typeof x}`);
}

/** Map key for a label: numbers and strings never collide, -0 and 0 are one label. */
function labelKey(x: Label): string {
  return typeof x === "number" ? `n:${x === 0 ? 0 : x}` : `s:${x}`;
}

/** Relative size below which cohenKappa's null variance is rounding, i.e. 0. */
const NULL_VARIANCE_ROUNDING = 1e-12;

/**
 * Cohen's kappa for two raters on the same items, plain or weighted, with its asymptotic SE
 * (Fleiss, Cohen & Everitt 1969) and the z test of kappa = 0, as statsmodels' cohens_kappa.
 * Categories default to the sorted union of labels (numbers ascending, strings by code point);
 * pass `categories` to fix the order for weights or to include unused categories. Weights use
 * category positions: linear 1 - |i-j|/(k-1), quadratic 1 - ((i-j)/(k-1))^2.
 */
export function cohenKappa(
  r1: ReadonlyArray<Label>,
  r2: ReadonlyArray<Label>,
  options: { weights?: KappaWeights; categories?: ReadonlyArray<Label> } = {},
): CohenKappa {
  if (r1.length === 0 || r2.length === 0) fail("empty", "r1 and r2 must be non-empty");
  if (r1.length !== r2.length) fail("length_mismatch", `r1 has ${r1.length} labels, r2 has ${r2.length}`);
  const kinds = new Set<string>();
  for (let i = 0; i < r1.length; i++) kinds.add(labelKind(`r1[${i}]`, r1[i]));
  for (let i = 0; i < r2.length; i++) kinds.add(labelKind(`r2[${i}]`, r2[i]));
  const weights = options.weights ?? "none";
  if (weights !== "none" && weights !== "linear" && weights !== "quadratic") {
    fail("bad_option", `weights must be "none", "linear" or "quadratic", got ${String(weights)}`);
  }
  let categories: Label[];
  if (options.categories !== undefined) {
    categories = [...options.categories];
    for (let i = 0; i < categories.length; i++) kinds.add(labelKind(`categories[${i}]`, categories[i]));
  } else {
    const seen = new Map<string, Label>();
    for (const x of [...r1, ...r2]) if (!seen.has(labelKey(x))) seen.set(labelKey(x), x === 0 ? 0 : x);
    categories = [...seen.values()];
    if (kinds.has("number") && !kinds.has("string")) sortNumbers(categories as number[]);
    else if (!kinds.has("number")) categories.sort((x, y) => compareCodePoints(x as string, y as string));
  }
  if (kinds.size > 1) fail("label_type", "labels must be all numbers or all strings");
  const index = new Map<string, number>();
  for (let i = 0; i < categories.length; i++) {
    const key = labelKey(categories[i]);
    if (index.has(key)) fail("bad_option", `categories lists ${String(categories[i])} twice`);
    index.set(key, i);
  }
  const k = categories.length;
  const n = r1.length;
  const counts: number[][] = Array.from({ length: k }, () => new Array<number>(k).fill(0));
  for (let i = 0; i < n; i++) {
    const x = index.get(labelKey(r1[i]));
    const y = index.get(labelKey(r2[i]));
    if (x === undefined) fail("out_of_range", `r1[${i}] = ${String(r1[i])} is not in categories`);
    if (y === undefined) fail("out_of_range", `r2[${i}] = ${String(r2[i])} is not in categories`);
    counts[x][y] += 1;
  }
  const w: number[][] = [];
  for (let i = 0; i < k; i++) {
    const row: number[] = [];
    for (let j = 0; j < k; j++) {
      if (i === j) row.push(1);
      else if (weights === "none") row.push(0);
      else if (weights === "linear") row.push(1 - Math.abs(i - j) / (k - 1));
      else {
        const dd = (i - j) / (k - 1);
        row.push(1 - dd * dd);
      }
    }
    w.push(row);
  }
  const rowFreq: number[] = [];
  const colFreq: number[] = [];
  for (let i = 0; i < k; i++) {
    let rs = 0;
    let cs = 0;
    for (let j = 0; j < k; j++) {
      rs += counts[i][j];
      cs += counts[j][i];
    }
    rowFreq.push(rs / n);
    colFreq.push(cs / n);
  }
  let po = 0;
  let pe = 0;
  for (let i = 0; i < k; i++) {
    for (let j = 0; j < k; j++) {
      po += w[i][j] * (counts[i][j] / n);
      pe += w[i][j] * (rowFreq[i] * colFreq[j]);
    }
  }
  const base = { n, categories, weights, observedAgreement: po, expectedAgreement: pe };
  if (!(pe < 1)) return { ...base, kappa: null, se: null, se0: null, z: null, p: null };
  const kappa = (po - pe) / (1 - pe);
  const wRow: number[] = []; // mean weight of row i against the column margin
  const wCol: number[] = []; // mean weight of column j against the row margin
  for (let i = 0; i < k; i++) {
    let sr = 0;
    let sc = 0;
    for (let j = 0; j < k; j++) {
      sr += colFreq[j] * w[i][j];
      sc += rowFreq[j] * w[j][i];
    }
    wRow.push(sr);
    wCol.push(sc);
  }
  let termA = 0;
  let term0 = 0;
  for (let i = 0; i < k; i++) {
    for (let j = 0; j < k; j++) {
      const ua = w[i][j] - (wRow[i] + wCol[j]) * (1 - kappa);
      termA += (counts[i][j] / n) * (ua * ua);
      const u0 = w[i][j] - (wRow[i] + wCol[j]);
      term0 += rowFreq[i] * colFreq[j] * (u0 * u0);
    }
  }
  const fac = 1 / ((1 - pe) * (1 - pe) * n);
  const tc = kappa - pe * (1 - kappa);
  const se = Math.sqrt(Math.max(0, (termA - tc * tc) * fac));
  // The null variance is term0 - pe^2 >= 0; within rounding of 0 (a rater who used one category:
  // kappa is 0/0 under the null) it is 0, so z and p are undefined rather than 0 / rounding noise.
  const v0 = term0 - pe * pe;
  const se0 = v0 > NULL_VARIANCE_ROUNDING * term0 ? Math.sqrt(v0 * fac) : 0;
  const z = se0 > 0 ? kappa / se0 : null;
  return { ...base, kappa, se, se0, z, p: z === null ? null : clampP(erfc(Math.abs(z) * SQRT1_2)) };
}

/**
 * Kendall's tau-b of two paired samples (ties adjusted), as scipy.stats.kendalltau (variant "b"):
 * (C - D) / sqrt((n0 - n1)(n0 - n2)), n0 = n(n-1)/2 pairs, n1 / n2 the pairs tied in x / y.
 * NaN when it is undefined: fewer than 2 pairs, or either sample constant. O(n^2).
 */
export function kendallTauB(x: ReadonlyArray<number>, y: ReadonlyArray<number>): number {
  if (x.length !== y.length) fail("length_mismatch", `x has ${x.length} values, y has ${y.length}`);
  for (let i = 0; i < x.length; i++) checkNumber(`x[${i}]`, x[i]);
  for (let i = 0; i < y.length; i++) checkNumber(`y[${i}]`, y[i]);
  const n = x.length;
  let concordant = 0;
  let discordant = 0;
  let tiesX = 0;
  let tiesY = 0;
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const dx = x[i] > x[j] ? 1 : x[i] < x[j] ? -1 : 0;
      const dy = y[i] > y[j] ? 1 : y[i] < y[j] ? -1 : 0;
      if (dx === 0) tiesX++;
      if (dy === 0) tiesY++;
      if (dx !== 0 && dy !== 0) {
        if (dx === dy) concordant++;
        else discordant++;
      }
    }
  }
  const n0 = (n * (n - 1)) / 2;
  // Each factor is an exact integer; the product rounds once, as Python's float(int) does.
  const denom = n0 === 0 ? 0 : Math.sqrt((n0 - tiesX) * (n0 - tiesY));
  return denom > 0 ? (concordant - discordant) / denom : NaN;
}

/** Result of fleissKappa. */
export interface FleissKappa {
  subjects: number;
  raters: number;
  categories: number;
  /** mean per-subject agreement P-bar */
  observedAgreement: number;
  /** sum of squared category proportions P-bar_e */
  expectedAgreement: number;
  /** null when expectedAgreement = 1 (every rating in one category) */
  kappa: number | null;
}

/**
 * Fleiss' kappa (1971) from a subjects x categories table of rating counts; every subject must
 * have the same number of raters (>= 2). As statsmodels fleiss_kappa(method="fleiss").
 */
export function fleissKappa(table: ReadonlyArray<ReadonlyArray<number>>): FleissKappa {
  if (table.length === 0) fail("empty", "table has no subjects");
  const k = table[0].length;
  if (k === 0) fail("empty", "table has no categories");
  for (let i = 0; i < table.length; i++) {
    if (table[i].length !== k) fail("length_mismatch", `row ${i} has ${table[i].length} categories, row 0 has ${k}`);
  }
  for (let i = 0; i < table.length; i++) {
    for (let j = 0; j < k; j++) checkInteger(`table[${i}][${j}]`, table[i][j], 0);
  }
  const raters = sumOf(table[0]);
  for (let i = 1; i < table.length; i++) {
    if (sumOf(table[i]) !== raters) fail("length_mismatch", `subject ${i} has ${sumOf(table[i])} ratings, subject 0 has ${raters}`);
  }
  if (raters < 2) fail("too_few", `needs at least 2 raters per subject, got ${raters}`);
  const subjects = table.length;
  let pBar = 0;
  for (let i = 0; i < subjects; i++) {
    let sq = 0;
    for (let j = 0; j < k; j++) sq += table[i][j] * table[i][j];
    pBar += (sq - raters) / (raters * (raters - 1));
  }
  pBar = pBar / subjects;
  let pe = 0;
  for (let j = 0; j < k; j++) {
    let cs = 0;
    for (let i = 0; i < subjects; i++) cs += table[i][j];
    const pj = cs / (subjects * raters);
    pe += pj * pj;
  }
  const kappa = pe < 1 ? (pBar - pe) / (1 - pe) : null;
  return { subjects, raters, categories: k, observedAgreement: pBar, expectedAgreement: pe, kappa };
}

/** Result of kendallW. */
export interface KendallW {
  raters: number;
  items: number;
  /** Kendall's coefficient of concordance with the tie correction; null when undefined (every
   *  rater ties every item) */
  w: number | null;
  /** Friedman's chi-square m (n - 1) W (df n - 1); null with w */
  chiSquare: number | null;
}

/**
 * Kendall's W for m raters ranking the same n items (rows = raters, columns = items; values are
 * ranks or scores, re-ranked per rater with average ranks for ties):
 * W = 12 S / (m^2 (n^3 - n) - m sum_i T_i), S = sum_j (R_j - m (n + 1) / 2)^2, R_j the rank sum
 * of item j, T_i = sum over rater i's tie groups of t^3 - t. For rankings this is the agreement
 * measure to use: Fleiss' kappa on rank positions treats the positions of one permutation as
 * independent ratings, which they are not. m (n - 1) W is Friedman's tie-corrected chi-square
 * (scipy.stats.friedmanchisquare). Needs m >= 2 and n >= 2.
 */
export function kendallW(ratings: ReadonlyArray<ReadonlyArray<number>>): KendallW {
  const m = ratings.length;
  if (m === 0) fail("empty", "ratings has no raters");
  const n = ratings[0].length;
  for (let i = 0; i < m; i++) {
    if (ratings[i].length !== n) fail("length_mismatch", `rater ${i} rates ${ratings[i].length} items, rater 0 rates ${n}`);
    for (let j = 0; j < n; j++) checkNumber(`ratings[${i}][${j}]`, ratings[i][j]);
  }
  if (m < 2) fail("too_few", `needs at least 2 raters, got ${m}`);
  if (n < 2) fail("too_few", `needs at least 2 items, got ${n}`);
  const sums = new Array<number>(n).fill(0);
  let ties = 0;
  for (let i = 0; i < m; i++) {
    const r = averageRanks(ratings[i]);
    for (let j = 0; j < n; j++) sums[j] += r[j];
    const sorted = sortNumbers([...ratings[i]]);
    let run = 1;
    for (let k = 1; k <= n; k++) {
      if (k < n && sorted[k] === sorted[k - 1]) run++;
      else {
        ties += run * run * run - run;
        run = 1;
      }
    }
  }
  const center = (m * (n + 1)) / 2;
  let ss = 0;
  for (let j = 0; j < n; j++) {
    const dev = sums[j] - center;
    ss += dev * dev;
  }
  const denom = m * m * (n * n * n - n) - m * ties;
  if (!(denom > 0)) return { raters: m, items: n, w: null, chiSquare: null };
  const w = (12 * ss) / denom;
  return { raters: m, items: n, w, chiSquare: m * (n - 1) * w };
}
