/**
 * The statistics, the PRNG and the percentile rule: xoshiro128** seeded by SplitMix32, the percentile interval, Interval.
 * Ported to py_trainer/py_trainer/core/stats/rng.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

import { checkInteger, fail } from "./errors.js";
import { TWO_POW_32 } from "./elementary.js";

/** xoshiro128** seeded by SplitMix32; one stream, specified in the module docs. */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** `seed` is an integer in [0, 2^32). */
  constructor(seed: number) {
    checkInteger("seed", seed, 0);
    if (seed >= TWO_POW_32) fail("out_of_range", `seed must be < 2^32, got ${seed}`);
    let x = seed >>> 0;
    const next = (): number => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
  }

  /** Next uint32 in [0, 2^32). */
  nextUint32(): number {
    const s1 = this.s1;
    const m = Math.imul(s1, 5) >>> 0;
    const result = Math.imul(((m << 7) | (m >>> 25)) >>> 0, 9) >>> 0;
    const t = (s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = ((this.s3 << 11) | (this.s3 >>> 21)) >>> 0;
    return result;
  }

  /** Uniform integer in [0, n) for 1 <= n <= 2^32, by rejection (no modulo bias). */
  nextIndex(n: number): number {
    const limit = TWO_POW_32 - (TWO_POW_32 % n);
    for (;;) {
      const x = this.nextUint32();
      if (x < limit) return x % n;
    }
  }
}

export function percentile(sorted: ReadonlyArray<number>, q: number): number {
  const h = (sorted.length - 1) * q;
  const i = Math.floor(h);
  if (i >= sorted.length - 1) return sorted[sorted.length - 1];
  const lo = sorted[i];
  const hi = sorted[i + 1];
  if (h === i || lo === hi) return lo;
  // An interpolation that touches an infinity is that infinity (the interval is unbounded there).
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return lo === -Infinity && (hi !== Infinity || q < 0.5) ? lo : hi;
  return lo + (h - i) * (hi - lo);
}

export function sortNumbers(xs: number[]): number[] {
  return xs.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
}

export function percentileInterval(stats: number[], confidence: number): Interval {
  const sorted = sortNumbers(stats);
  const q = (1 - confidence) / 2;
  return { lower: percentile(sorted, q), upper: percentile(sorted, 1 - q) };
}

/** A two-sided interval. */
export interface Interval {
  lower: number;
  upper: number;
}
