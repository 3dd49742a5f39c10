// Properties of the statistics (fast-check): closed forms, symmetries and invariants that any
// correct implementation satisfies. The numeric references (scipy, statsmodels, scikit-learn)
// are checked on the Python port in tests/test_stats_references.py; parity ties the two together.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  Rng,
  StatsInputError,
  bootstrapMeanCI,
  cohenKappa,
  elementary,
  fleissKappa,
  kendallTauB,
  mcnemarExactP,
  mean,
  minimumDetectableEffect,
  nanMean,
  nanSampleSd,
  normalCdf,
  normalQuantile,
  pairedBootstrapCI,
  pairedComparison,
  relativeChangeCI,
  requiredNForDelta,
  sampleSd,
  standardError,
  startVsEnd,
  studentTQuantile,
  trend,
  wilsonInterval,
} from "../src/agent/core/stats/index.js";
import { ulpDistance } from "../src/parity/harness.js";

function kindOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof StatsInputError) return e.kind;
    throw e;
  }
  return undefined;
}

const close = (a: number, b: number, rel: number) => Math.abs(a - b) <= rel * Math.max(1, Math.abs(a), Math.abs(b));
const num = fc.double({ min: -1e3, max: 1e3, noNaN: true });
const xs = fc.array(num, { minLength: 2, maxLength: 30 });
const bits = (n: number) => fc.array(fc.constantFrom(0, 1), { minLength: n, maxLength: n });
const binaryPair = fc.integer({ min: 2, max: 40 }).chain((n) => fc.tuple(bits(n), bits(n)));

describe("elementary functions", () => {
  test("exp, log and atan are within 2 ulp of the platform's", () => {
    const ulps = ulpDistance;
    fc.assert(
      fc.property(fc.double({ min: -700, max: 700, noNaN: true }), (x) => {
        assert.ok(ulps(elementary.exp(x), Math.exp(x)) <= 2, `exp(${x})`);
      }),
    );
    fc.assert(
      fc.property(fc.double({ min: 1e-300, max: 1e300, noNaN: true }), (x) => {
        const want = Math.log(x);
        assert.ok(ulps(elementary.log(x), want) <= 2 || Math.abs(elementary.log(x) - want) <= 2 * Number.EPSILON, `log(${x})`);
      }),
    );
    fc.assert(
      fc.property(fc.double({ min: -1e10, max: 1e10, noNaN: true }), (x) => {
        assert.ok(ulps(elementary.atan(x), Math.atan(x)) <= 2, `atan(${x})`);
      }),
    );
  });
});

describe("distributions", () => {
  test("normalQuantile inverts normalCdf (lower tail, where p keeps its digits), and the CDF is symmetric", () => {
    fc.assert(
      fc.property(fc.double({ min: -37, max: 1, noNaN: true }), (x) => {
        assert.ok(close(normalQuantile(normalCdf(x)), x, 1e-9), `${x}`);
        assert.ok(Math.abs(normalCdf(x) + normalCdf(-x) - 1) <= 1e-15);
      }),
    );
    assert.equal(normalQuantile(0.5), 0);
  });

  test("studentTQuantile: closed forms for df 1 and 2, symmetry, and the normal limit", () => {
    fc.assert(
      fc.property(fc.double({ min: 0.01, max: 0.99, noNaN: true }), (p) => {
        assert.ok(close(studentTQuantile(p, 1), Math.tan(Math.PI * (p - 0.5)), 1e-12));
        assert.ok(close(studentTQuantile(p, 2), (2 * p - 1) / Math.sqrt(2 * p * (1 - p)), 1e-12));
        assert.ok(close(studentTQuantile(p, 7), -studentTQuantile(1 - p, 7), 1e-12));
      }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), (df) => {
        assert.ok(studentTQuantile(0.975, df) > studentTQuantile(0.975, df + 1));
      }),
    );
    assert.ok(close(studentTQuantile(0.975, 4000), normalQuantile(0.975), 1e-3));
  });
});

describe("descriptive and proportions", () => {
  test("mean lies within the data, sd >= 0, se = sd / sqrt n, sd of a shift is unchanged", () => {
    fc.assert(
      fc.property(xs, fc.integer({ min: -100, max: 100 }), (v, c) => {
        const m = mean(v);
        assert.ok(m >= Math.min(...v) - 1e-9 && m <= Math.max(...v) + 1e-9);
        const sd = sampleSd(v);
        assert.ok(sd >= 0);
        assert.ok(close(standardError(v), sd / Math.sqrt(v.length), 1e-15));
        assert.ok(Math.abs(sampleSd(v.map((x) => x + c)) - sd) <= 1e-9 * (1 + sd));
      }),
    );
    assert.equal(sampleSd([4, 4, 4]), 0);
  });

  test("Wilson interval: 0 <= lower <= p <= upper <= 1, narrower at lower confidence", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2000 }).chain((n) => fc.tuple(fc.integer({ min: 0, max: n }), fc.constant(n))),
        ([k, n]) => {
          const w = wilsonInterval(k, n);
          assert.ok(0 <= w.lower && w.lower <= w.estimate + 1e-15 && w.estimate <= w.upper + 1e-15 && w.upper <= 1);
          const narrow = wilsonInterval(k, n, { confidence: 0.8 });
          assert.ok(narrow.upper - narrow.lower <= w.upper - w.lower);
        },
      ),
    );
  });
});

describe("missing values and held-out bootstraps", () => {
  const missing = fc.constantFrom(NaN, null, Infinity, -Infinity);
  const withMissing = fc.array(fc.oneof({ arbitrary: fc.double({ min: -1e3, max: 1e3, noNaN: true }), weight: 4 }, { arbitrary: missing, weight: 1 }), {
    maxLength: 30,
  });
  const finiteOf = (v: ReadonlyArray<number | null>) => v.filter((x): x is number => x !== null && Number.isFinite(x));

  test("nanMean / nanSampleSd equal mean / sampleSd of the finite values, NaN when too few", () => {
    fc.assert(
      fc.property(withMissing, (v) => {
        const f = finiteOf(v);
        if (f.length === 0) assert.ok(Number.isNaN(nanMean(v)));
        else assert.equal(nanMean(v), mean(f));
        if (f.length < 2) assert.ok(Number.isNaN(nanSampleSd(v)));
        else assert.equal(nanSampleSd(v), sampleSd(f));
      }),
    );
  });

  test("bootstrapMeanCI: seeded, within the range of the data, ignores missing values", () => {
    fc.assert(
      fc.property(withMissing, fc.integer({ min: 0, max: 2 ** 32 - 1 }), (v, seed) => {
        const f = finiteOf(v);
        const ci = bootstrapMeanCI(v, { seed, resamples: 100 });
        assert.deepEqual(bootstrapMeanCI(f, { seed, resamples: 100 }), ci);
        if (f.length < 2) {
          assert.ok(Number.isNaN(ci.lower) && Number.isNaN(ci.upper));
          return;
        }
        const slack = 1e-12 * Math.max(1, ...f.map(Math.abs)); // (x + x + x) / 3 may round past x
        assert.ok(Math.min(...f) - slack <= ci.lower && ci.lower <= ci.upper && ci.upper <= Math.max(...f) + slack);
        const narrow = bootstrapMeanCI(f, { seed, resamples: 100, confidence: 0.5 });
        assert.ok(ci.lower <= narrow.lower && narrow.upper <= ci.upper);
      }),
      { numRuns: 60 },
    );
  });

  test("relativeChangeCI: end = (1 + r) start gives r exactly-ish with a tight CI; missing pairs are dropped", () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.05, max: 1, noNaN: true }), { minLength: 1, maxLength: 20 }),
        fc.double({ min: -0.9, max: 2, noNaN: true }),
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        (start, r, seed) => {
          const end = start.map((x) => (1 + r) * x);
          const rc = relativeChangeCI(start, end, { seed, resamples: 50 });
          assert.ok(Math.abs(rc.estimate - r) <= 1e-12 * (1 + Math.abs(r)));
          assert.ok(Math.abs(rc.lower - r) <= 1e-12 * (1 + Math.abs(r)) && Math.abs(rc.upper - r) <= 1e-12 * (1 + Math.abs(r)));
          const padded = relativeChangeCI([...start, NaN, 0.5], [...end, 0.5, null], { seed, resamples: 50 });
          assert.deepEqual(padded, rc);
        },
      ),
      { numRuns: 60 },
    );
    assert.deepEqual(relativeChangeCI([0, 0], [1, 1], { seed: 0 }), { estimate: NaN, lower: NaN, upper: NaN });
    assert.deepEqual(relativeChangeCI([], [], { seed: 0 }), { estimate: NaN, lower: NaN, upper: NaN });
  });

  test("kendallTauB: 1 for the same order, -1 reversed, symmetric, in [-1, 1], NaN for a constant sample", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.double({ min: -1, max: 1, noNaN: true })), { maxLength: 25 }), (pairs) => {
        const x = pairs.map((p) => p[0]);
        const y = pairs.map((p) => p[1]);
        const t = kendallTauB(x, y);
        if (Number.isNaN(t)) assert.ok(new Set(x).size < 2 || new Set(y.map((v) => (v === 0 ? 0 : v))).size < 2);
        else {
          assert.ok(t >= -1 - 1e-15 && t <= 1 + 1e-15);
          assert.equal(kendallTauB(y, x), t);
          assert.ok(
            kendallTauB(
              x,
              y.map((v) => -v),
            ) === -t,
          ); // === : 0 and -0 are one value here
        }
      }),
    );
    assert.equal(kendallTauB([0, 1, 2, 3], [0, 1, 2, 3]), 1);
    assert.equal(kendallTauB([0, 1, 2, 3], [3, 2, 1, 0]), -1);
    assert.equal(kendallTauB([0, 1, 2, 3], [1, 0, 2, 3]), 4 / 6);
    assert.ok(Number.isNaN(kendallTauB([1], [2])));
  });
});

describe("paired comparison", () => {
  test("exact McNemar p: symmetric, in (0, 1], equal to the binomial sum for small n", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 40 }), (b, c) => {
        const p = mcnemarExactP(b, c);
        assert.equal(p, mcnemarExactP(c, b));
        assert.ok(p > 0 && p <= 1);
        const n = b + c;
        let tail = 0;
        let coef = 1;
        for (let k = 0; k <= Math.min(b, c); k++) {
          tail += coef;
          coef = (coef * (n - k)) / (k + 1);
        }
        assert.ok(close(p, n === 0 ? 1 : Math.min(1, (2 * tail) / 2 ** n), 1e-13));
      }),
    );
  });

  test("swapping a and b negates the difference and swaps the discordant counts; t CI contains z CI", () => {
    fc.assert(
      fc.property(binaryPair, ([a, b]) => {
        const ab = pairedComparison(a, b);
        const ba = pairedComparison(b, a);
        assert.ok(close(ab.meanDiff, -ba.meanDiff, 1e-15));
        assert.deepEqual(ab.discordant, { b: ba.discordant!.c, c: ba.discordant!.b });
        assert.equal(ab.mcnemarP, ba.mcnemarP);
        assert.equal(ab.discordant!.c - ab.discordant!.b, Math.round(ab.meanDiff * a.length));
        assert.ok(ab.ciT.lower <= ab.ciNormal.lower + 1e-15 && ab.ciNormal.upper <= ab.ciT.upper + 1e-15);
      }),
    );
  });

  test("bootstrap: same seed same interval, inside the range of the differences", () => {
    fc.assert(
      fc.property(binaryPair, fc.integer({ min: 0, max: 2 ** 32 - 1 }), ([a, b], seed) => {
        const one = pairedBootstrapCI(a, b, { resamples: 200, seed });
        assert.deepEqual(pairedBootstrapCI(a, b, { resamples: 200, seed }), one);
        const d = a.map((x, i) => b[i] - x);
        assert.ok(Math.min(...d) <= one.lower && one.lower <= one.upper && one.upper <= Math.max(...d));
      }),
      { numRuns: 50 },
    );
  });

  test("required n and the minimum detectable effect are inverses", () => {
    fc.assert(
      fc.property(fc.double({ min: 0.005, max: 1, noNaN: true }), fc.double({ min: 0.01, max: 2, noNaN: true }), (delta, sd) => {
        const n = requiredNForDelta(delta, sd);
        assert.equal(requiredNForDelta(-delta, sd), n);
        assert.ok(minimumDetectableEffect(n, sd) <= delta * (1 + 1e-12));
        if (n > 1) assert.ok(minimumDetectableEffect(n - 1, sd) > delta);
      }),
    );
    assert.equal(requiredNForDelta(0.05, 0.3), Math.ceil((((1.959963984540054 + 0.8416212335729143) * 0.3) / 0.05) ** 2));
  });
});

describe("agreement", () => {
  const labels = fc
    .integer({ min: 2, max: 40 })
    .chain((n) =>
      fc.tuple(
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: n, maxLength: n }),
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: n, maxLength: n }),
      ),
    );
  test("Cohen's kappa is symmetric, <= 1, and 1 for perfect agreement", () => {
    fc.assert(
      fc.property(labels, fc.constantFrom<"none" | "linear" | "quadratic">("none", "linear", "quadratic"), ([r1, r2], weights) => {
        const k12 = cohenKappa(r1, r2, { weights });
        const k21 = cohenKappa(r2, r1, { weights });
        if (k12.kappa === null) assert.equal(k21.kappa, null);
        else {
          assert.ok(close(k12.kappa, k21.kappa!, 1e-12) && k12.kappa <= 1 + 1e-12);
          assert.ok(Math.abs(k12.se! ** 2 - k21.se! ** 2) <= 1e-12); // compare variances: se = sqrt(~0) amplifies rounding
        }
        const self = cohenKappa(r1, r1, { weights });
        if (self.kappa !== null) assert.ok(close(self.kappa, 1, 1e-12));
      }),
    );
  });

  test("plain kappa does not depend on what the labels are called", () => {
    fc.assert(
      fc.property(labels, ([r1, r2]) => {
        const names = ["d", "a", "c", "b"];
        const k = cohenKappa(r1, r2).kappa;
        const renamed = cohenKappa(
          r1.map((x) => names[x]),
          r2.map((x) => names[x]),
        ).kappa;
        assert.ok(k === null ? renamed === null : close(k, renamed!, 1e-12));
      }),
    );
  });

  test("Fleiss' kappa is 1 when every subject's raters agree", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 2, maxLength: 10 }), fc.integer({ min: 2, max: 6 }), (cats, raters) => {
        const table = cats.map((c) => [0, 1, 2].map((j) => (j === c ? raters : 0)));
        const k = fleissKappa(table).kappa;
        if (new Set(cats).size > 1) assert.ok(k !== null && close(k, 1, 1e-12));
        else assert.equal(k, null);
      }),
    );
  });
});

describe("training curves", () => {
  test("Mann-Kendall on a strictly increasing series: S = n(n-1)/2, Sen's slope of a line is its slope", () => {
    fc.assert(
      fc.property(fc.integer({ min: 3, max: 30 }), fc.double({ min: 0.001, max: 2, noNaN: true }), (n, slope) => {
        const series = Array.from({ length: n }, (_, i) => 0.1 + slope * i);
        const t = trend(series);
        assert.equal(t.s, (n * (n - 1)) / 2);
        assert.ok(close(t.senSlope, slope, 1e-9));
        const r = trend([...series].reverse());
        assert.equal(r.s, -t.s);
        assert.ok(close(r.z, -t.z, 1e-15) && close(r.p, t.p, 1e-15));
      }),
    );
    assert.equal(trend([2, 2, 2, 2]).p, 1);
  });

  test("startVsEnd: a flat series has change 0 with a [0, 0] CI; a noisy step up is detected", () => {
    fc.assert(
      fc.property(fc.integer({ min: 10, max: 30 }), fc.integer({ min: 3, max: 10 }), fc.double({ min: 0.01, max: 1, noNaN: true }), (len, w, level) => {
        const window = Math.min(w, Math.floor(len / 2));
        const flat = startVsEnd(new Array<number>(len).fill(level), { window });
        assert.equal(flat.change, 0);
        assert.deepEqual(flat.changeCi, { lower: 0, upper: 0 });
        // alternating +-0.1 noise: a single jump far above the noise reads as a random walk (phi at its maximum)
        const noisy = (x: number, i: number) => x + (i % 2 ? 0.1 : -0.1);
        const step = startVsEnd([...new Array<number>(len).fill(level), ...new Array<number>(len).fill(level + 0.5)].map(noisy), { window });
        assert.ok(step.changeCi.lower > 0);
      }),
      { numRuns: 40 },
    );
  });

  test("startVsEnd refuses a series whose window sums, change or first differences overflow (issue 31)", () => {
    const overflowing: Array<[number[], number]> = [
      [[1e308, 1e308, 0.1, 0.2, 0.3, 0.4], 2], // the first window's sum is Infinity
      [[0.1, 0.2, 0.3, 0.4, -1e308, -1e308], 2], // the last window's sum is -Infinity
      [[-1e308, 0.1, 0.2, 0.3, 0.4, 1e308], 1], // the change is Infinity
      [[1e308, -1e308, 0.1, 0.2, 0.3, 0.4], 1], // a first difference is -Infinity
      [[0.1, 1e200, -1e200, 0.2, 0.3, 0.4], 1], // finite differences whose squares overflow
      [[0.1, 1e308, -1e200, 1e300, 0.2, 0.3, 0.4, 0.5], 3], // huge values among ordinary ones
      [[0.1, 1e308, -1e200, 1e300, 0.2, 0.3, 0.4, 0.5], 4],
    ];
    for (const [series, window] of overflowing) {
      assert.throws(
        () => startVsEnd(series, { window }),
        (e: unknown) => e instanceof StatsInputError && e.kind === "out_of_range" && /^series overflows/.test(e.message),
        `window ${window}: ${series.join(", ")}`,
      );
    }
    // large but representable: a result, finite
    const big = startVsEnd([1e150, 2e150, 3e150, 4e150, 5e150, 6e150], { window: 2 });
    assert.ok(Number.isFinite(big.changeCi.lower) && Number.isFinite(big.changeCi.upper));
  });

  test("Rng: indices in range, same seed same stream", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.integer({ min: 1, max: 2 ** 32 }), (seed, n) => {
        const a = new Rng(seed);
        const b = new Rng(seed);
        for (let i = 0; i < 20; i++) {
          const x = a.nextIndex(n);
          assert.ok(Number.isInteger(x) && x >= 0 && x < n);
          assert.equal(b.nextIndex(n), x);
        }
      }),
    );
  });
});

describe("errors", () => {
  test("bad input has a stable kind", () => {
    assert.equal(
      kindOf(() => mean([])),
      "empty",
    );
    assert.equal(
      kindOf(() => sampleSd([1])),
      "too_few",
    );
    assert.equal(
      kindOf(() => pairedComparison([1, 0], [1])),
      "length_mismatch",
    );
    assert.equal(
      kindOf(() => requiredNForDelta(0, 0.3)),
      "zero_delta",
    );
    assert.equal(
      kindOf(() => normalQuantile(1)),
      "out_of_range",
    );
    assert.equal(
      kindOf(() => wilsonInterval(1.5, 3)),
      "not_integer",
    );
    assert.equal(
      kindOf(() => cohenKappa([1, "a"], [1, "a"])),
      "label_type",
    );
    assert.equal(
      kindOf(() => cohenKappa([1], [1], { weights: "cubic" as "linear" })),
      "bad_option",
    );
    assert.equal(
      kindOf(() => nanMean([1, "2" as unknown as number])),
      "nan",
    );
    assert.equal(
      kindOf(() => bootstrapMeanCI([0.2], { seed: -1 })),
      "out_of_range",
    );
    assert.equal(
      kindOf(() => bootstrapMeanCI([0.2, 0.3], { seed: 0, resamples: 0 })),
      "out_of_range",
    );
    assert.equal(
      kindOf(() => relativeChangeCI([1, 0], [1], { seed: 0 })),
      "length_mismatch",
    );
    assert.equal(
      kindOf(() => kendallTauB([1, 2], [1])),
      "length_mismatch",
    );
    assert.equal(
      kindOf(() => kendallTauB([1, NaN], [1, 2])),
      "nan",
    );
    fc.assert(
      fc.property(xs, fc.nat(), fc.constantFrom(NaN, Infinity), (v, at, bad) => {
        const w = [...v];
        w[at % w.length] = bad;
        const want = Number.isNaN(bad) ? "nan" : "out_of_range";
        assert.equal(
          kindOf(() => mean(w)),
          want,
        );
        assert.equal(
          kindOf(() => pairedComparison(w, v)),
          want,
        );
        assert.equal(
          kindOf(() => trend(w.length >= 3 ? w : [...w, 1])),
          want,
        );
      }),
    );
  });
});
