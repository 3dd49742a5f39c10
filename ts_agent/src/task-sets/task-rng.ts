/**
 * The task sets' draws (ints, picks, samples, shuffles) over one seeded stream, mulberry32.
 *
 * Why not core/stats/rng.ts's Rng, the one PRNG of everything else: every checked-in task file
 * (agent-evals/tasks/*.jsonl and .meta.json, checked byte for byte by `--check` and the tests)
 * was drawn from this stream, and so was what was measured on them: baseline.json, the embedded
 * models built from those files, the demo's numbers in docs/. Drawing from xoshiro128** instead
 * would regenerate every file and invalidate those records, for no gain in the statistics (no
 * statistic is computed from this stream; Rng's Python port is what parity needs). A new task-set
 * generator takes its randomness from Rng; this stream only reproduces the files that exist.
 */

/** mulberry32: a small 32-bit PRNG; returns floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The generator's draws (ints, picks, samples, shuffles) over one mulberry32 stream. */
export class TaskRng {
  constructor(private readonly next: () => number) {}
  float(): number {
    return this.next();
  }
  /** Integer in [lo, hi], inclusive. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }
  /** k distinct items, in random order. */
  sample<T>(items: readonly T[], k: number): T[] {
    return this.shuffle(items).slice(0, k);
  }
  /** Fisher-Yates on a copy. */
  shuffle<T>(items: readonly T[]): T[] {
    const out = items.slice();
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
}
