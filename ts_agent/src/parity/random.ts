/**
 * Random cross-check inputs: for every function in harness.ts's FUNCTIONS (except rewardNames,
 * which takes no input) draws `--runs` inputs with fast-check from `--seed`, runs the TS code on
 * them and writes the cases, results included, in the vector format to `--out`/<function>.json.
 * scripts/parity.py then recomputes every case in Python (one process per language).
 *
 *   cd ts_agent && node_modules/.bin/tsx src/parity/random.ts --out /tmp/parity --runs 1000 --seed 1
 *
 * Inputs are mostly valid with a few percent of invalid ones (NaN, Infinity, wrong sizes, bad
 * options) so error kinds are cross-checked too. Text is built from a fixed alphabet of tags,
 * words, whitespace, punctuation and non-ASCII letters, including characters assigned after
 * CPython 3.11's Unicode 14 (both graders read one checked-in table, char_classes.json). Numeric
 * inputs include integers beyond 2^53 and magnitudes that overflow. Sizes stay small so Python
 * checks the lot in seconds.
 */
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import fc from "fast-check";
import { FUNCTIONS, makeCase, makeFile, type VectorFile } from "./harness.js";
import { formatVectorFile } from "./vectors.js";
import {
  alpha,
  answers,
  bigInteger,
  confidence,
  finite,
  huge,
  missing,
  mostly,
  numberAnswers,
  numberText,
  numberWord,
  optionsOf,
  pair,
  power,
  probability,
  sample,
  score,
  seed,
  spec,
  tag,
  text,
  value,
  wild,
  withBad,
  withMissing,
  withMissingOrBad,
  word,
  type Draw,
} from "./random-inputs.js";

// ---------------------------------------------------------------------------------------------
// One arbitrary per function

const ARBITRARIES: Record<string, fc.Arbitrary<Draw>> = {
  groupRelativeAdvantage: fc
    .record({
      groupSize: mostly(fc.integer({ min: 1, max: 8 }), fc.constantFrom<unknown>(0, 1.5, -2)),
      groups: fc.integer({ min: 1, max: 6 }),
      extra: mostly(fc.constant(0), fc.constant(1)),
      scale: fc.option(mostly(fc.constantFrom("group", "batch", "none"), fc.constant("global")), { nil: undefined }),
      eps: fc.option(mostly(fc.oneof(fc.constant(1e-4), fc.constant(0), finite(0, 1)), fc.constantFrom<unknown>(-1, NaN)), { nil: undefined }),
    })
    .chain(({ groupSize, groups, extra, scale, eps }) => {
      const len = (typeof groupSize === "number" && groupSize > 0 ? Math.ceil(groupSize) : 2) * groups + extra;
      const reward = fc.oneof(fc.constantFrom(0, 1, 0.5, null, null), finite(-5, 5), fc.constantFrom<unknown>(NaN), fc.constantFrom<unknown>(Infinity));
      const rewardMostlyFine = fc.oneof({ arbitrary: fc.oneof(fc.constantFrom(0, 1, 0.5, null), finite(-5, 5)), weight: 60 }, { arbitrary: reward, weight: 1 });
      return fc.array(rewardMostlyFine, { minLength: len, maxLength: len }).map((rewards) => ({
        args: [rewards, groupSize],
        options: optionsOf({ scale, eps }),
      }));
    }),
  normalizeAnswer: fc
    .record({ t: text, caseSensitive: fc.option(fc.boolean(), { nil: undefined }), ignorePunctuation: fc.option(fc.boolean(), { nil: undefined }) })
    .map(({ t, ...o }) => ({ args: [t], options: optionsOf(o) })),
  extractAnswer: fc.record({ t: text, tag }).map(({ t, tag }) => ({ args: [t, tag] })),
  exactMatchReward: fc
    .record({
      t: text,
      answers: fc.oneof(answers, word),
      tag: fc.option(tag, { nil: undefined }),
      requireTag: fc.option(fc.boolean(), { nil: undefined }),
      match: fc.option(mostly(fc.constantFrom("exact", "prefix", "contains"), fc.constant("fuzzy")), { nil: undefined }),
      caseSensitive: fc.option(fc.boolean(), { nil: undefined }),
      ignorePunctuation: fc.option(fc.boolean(), { nil: undefined }),
    })
    .map(({ t, answers, ...o }) => ({ args: [t, answers], options: optionsOf(o) })),
  formatReward: fc
    .record({
      t: text,
      think: fc.option(mostly(fc.constantFrom("optional", "required", "forbidden"), fc.constant("sometimes")), { nil: undefined }),
      partialCredit: fc.option(fc.boolean(), { nil: undefined }),
      answerTag: fc.option(mostly(fc.constantFrom("answer", "label"), fc.constantFrom("think", "")), { nil: undefined }),
      thinkTag: fc.option(mostly(fc.constantFrom("think", "reasoning"), fc.constant("answer")), { nil: undefined }),
    })
    .map(({ t, ...o }) => ({ args: [t], options: optionsOf(o) })),
  finalNumber: fc.record({ t: numberText, tag }).map(({ t, tag }) => ({ args: [t, tag] })),
  finalNumberMatchReward: fc
    .record({ t: numberText, answers: fc.oneof(numberAnswers, numberWord), tag: fc.option(tag, { nil: undefined }) })
    .map(({ t, answers, ...o }) => ({ args: [t, answers], options: optionsOf(o) })),
  stopsAfterAnswerReward: fc.record({ t: numberText, tag: fc.option(tag, { nil: undefined }) }).map(({ t, ...o }) => ({ args: [t], options: optionsOf(o) })),
  composeRewards: fc
    .array(
      fc.record({
        weight: mostly(finite(-3, 3), fc.constantFrom<unknown>(NaN, Infinity, "1")),
        value: fc.oneof(score, finite(-10, 10), fc.constantFrom<unknown>(null, NaN)),
      }),
      { minLength: 1, maxLength: 4 },
    )
    .chain((fns) => mostly(fc.constant(fns), fc.constant([])))
    .map((fns) => ({ args: [fns] })),
  buildReward: fc
    .record({ spec, completions: fc.array(text, { minLength: 1, maxLength: 4 }), answers })
    .map(({ spec, completions, answers }) => ({ args: [spec, completions, answers] })),
  composeRewardSpecs: fc
    .record({
      specs: mostly(fc.array(spec, { minLength: 1, maxLength: 3 }), fc.constant([])),
      completions: fc.array(text, { minLength: 1, maxLength: 4 }),
      answers,
    })
    .map(({ specs, completions, answers }) => ({ args: [specs, completions, answers] })),

  normalCdf: mostly(fc.oneof(finite(-40, 40), fc.double({ noNaN: true }), fc.constantFrom(0, -0, 1.5, -1.5, 27.3, -27.3)), fc.constant(NaN)).map((x) => ({
    args: [x],
  })),
  normalQuantile: probability.map((p) => ({ args: [p] })),
  studentTQuantile: fc
    .record({
      p: mostly(fc.oneof(finite(0.0005, 0.9995), fc.constantFrom(0.975, 0.025, 0.995, 0.5)), fc.constantFrom<unknown>(0, 1, NaN)),
      df: mostly(fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 400 })), fc.constantFrom<unknown>(0, 2.5, -1)),
    })
    .map(({ p, df }) => ({ args: [p, df] })),
  noSpread: fc // near-equal values (one value times 1 + a few ulps) as often as arbitrary ones
    .record({
      xs: fc.oneof(
        sample(0, 20),
        fc
          .tuple(fc.oneof(score, value), fc.array(fc.integer({ min: -80, max: 80 }), { maxLength: 20 }))
          .map(([x, us]) => [x as number, ...us.map((u) => (x as number) * (1 + u * Number.EPSILON))]),
      ),
      scale: fc.option(mostly(fc.oneof(finite(0, 2), fc.constant(0)), fc.constantFrom<unknown>(-1, NaN, Infinity)), { nil: undefined }),
    })
    .map(({ xs, scale }) => ({ args: [xs], options: optionsOf({ scale }) })),
  mean: mostly(sample(1, 30), sample(0, 0)).map((xs) => ({ args: [xs] })),
  sampleSd: mostly(sample(2, 30), sample(0, 1)).map((xs) => ({ args: [xs] })),
  standardError: mostly(sample(2, 30), sample(0, 1)).map((xs) => ({ args: [xs] })),
  nanMean: withMissingOrBad(0, 30).map((xs) => ({ args: [xs] })),
  nanSampleSd: withMissingOrBad(0, 30).map((xs) => ({ args: [xs] })),
  wilsonInterval: fc
    .oneof({ arbitrary: fc.integer({ min: 0, max: 5000 }), weight: 10 }, { arbitrary: fc.constantFrom(2 ** 60, 1e154, 1e200, 1e300), weight: 1 })
    .chain((n) =>
      fc.record({
        n: mostly(fc.constant(n), fc.constantFrom<unknown>(-1, 2.5)),
        successes: mostly(n > 5000 ? fc.constantFrom(0, 1, n / 2, n) : fc.integer({ min: 0, max: n }), fc.constantFrom<unknown>(n * 2, 0.5, -1)),
        confidence,
      }),
    )
    .map(({ n, successes, confidence }) => ({ args: [successes, n], options: optionsOf({ confidence }) })),
  mcnemarExactP: fc
    .record({
      b: mostly(fc.oneof(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 3000 })), fc.constantFrom<unknown>(-1, 1.5, NaN)),
      c: fc.oneof(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 3000 })),
    })
    .map(({ b, c }) => ({ args: [b, c] })),
  pairedComparison: fc.record({ ab: pair(60), confidence }).map(({ ab, confidence }) => ({ args: [ab[0], ab[1]], options: optionsOf({ confidence }) })),
  pairedBootstrapCI: fc
    .record({ ab: pair(25), resamples: mostly(fc.integer({ min: 1, max: 120 }), fc.constantFrom<unknown>(0, 2.5)), seed, confidence })
    .map(({ ab, ...o }) => ({ args: [ab[0], ab[1]], options: optionsOf(o) })),
  bootstrapMeanCI: fc
    .record({
      values: withMissingOrBad(0, 25, fc.oneof(score, value)),
      resamples: mostly(fc.integer({ min: 1, max: 120 }), fc.constantFrom<unknown>(0, 2.5)),
      seed,
      confidence,
    })
    .map(({ values, ...o }) => ({ args: [values], options: optionsOf(o) })),
  intervalOverRuns: fc
    .record({
      values: fc.oneof(
        fc.array(fc.oneof(score, value), { maxLength: 9 }),
        fc.array(value, { minLength: 10, maxLength: 20 }),
        fc.constantFrom([0.2, 0.2, 0.2], [0.6 - 0.4, 0.8 - 0.6, 1 - 0.8]),
      ),
      confidence,
    })
    .map(({ values, ...o }) => ({ args: [values], options: optionsOf(o) })),
  relativeChangeCI: fc
    .record({
      n: fc.oneof(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 25 })),
      // 0/1 starts of a few pairs often have a zero mean, or zero-mean resamples
      start: fc.constantFrom<fc.Arbitrary<unknown>>(fc.constantFrom(0, 1), score, value),
      extra: mostly(fc.constant(0), fc.constant(1)),
      bad: mostly(fc.constant(false), fc.constant(true)),
      resamples: mostly(fc.integer({ min: 1, max: 120 }), fc.constantFrom<unknown>(0, 2.5)),
      seed,
      confidence,
    })
    .chain(({ n, start, extra, bad, ...o }) =>
      fc
        .tuple((bad ? withBad : withMissing)(n, n, start), withMissing(n + extra, n + extra, fc.oneof(score, value)))
        .map(([a, b]) => ({ args: [a, b], options: optionsOf(o) })),
    ),
  requiredNForDelta: fc
    .record({
      delta: mostly(fc.oneof(finite(0.001, 1), finite(-1, -0.001), fc.constantFrom(0.05, -0.05, 0.2)), fc.constantFrom<unknown>(0, -0, NaN, Infinity, 1e-300)),
      sdDiff: mostly(fc.oneof(finite(0, 2), fc.constant(0)), fc.constantFrom<unknown>(-0.1, NaN, Infinity)),
      alpha,
      power,
    })
    .map(({ delta, sdDiff, ...o }) => ({ args: [delta, sdDiff], options: optionsOf(o) })),
  minimumDetectableEffect: fc
    .record({
      n: mostly(fc.integer({ min: 1, max: 10000 }), fc.constantFrom<unknown>(0, 2.5, NaN)),
      sdDiff: mostly(finite(0, 2), fc.constantFrom<unknown>(-0.1, Infinity)),
      alpha,
      power,
    })
    .map(({ n, sdDiff, ...o }) => ({ args: [n, sdDiff], options: optionsOf(o) })),
  cohenKappa: fc
    .record({
      n: fc.integer({ min: 0, max: 40 }),
      strings: fc.boolean(),
      k: fc.integer({ min: 1, max: 5 }),
      weights: fc.option(mostly(fc.constantFrom("none", "linear", "quadratic"), fc.constant("cubic")), { nil: undefined }),
      categories: mostly(fc.constantFrom("none", "none", "exact", "extra", "reversed"), fc.constant("missing"), 4),
      noise: mostly(fc.constant(0), fc.constantFrom(1, 2, 3)),
    })
    .chain(({ n, strings, k, weights, categories, noise }) => {
      const labels: unknown[] = strings ? ["layering", "smurfing", "structuring", "trade_based", "É"].slice(0, k) : [0, 1, 2, 3, 4].slice(0, k);
      const rating = fc.constantFrom(...labels);
      return fc.tuple(fc.array(rating, { minLength: n, maxLength: n }), fc.array(rating, { minLength: n, maxLength: n }), fc.nat()).map(([r1, r2, pick]) => {
        if (noise === 1 && r1.length > 0) r1[pick % r1.length] = strings ? 3 : "3"; // mixed label types
        if (noise === 2) r2.push(labels[0]); // length mismatch
        if (noise === 3 && r1.length > 0) r1[pick % r1.length] = NaN;
        const cats =
          categories === "exact"
            ? labels
            : categories === "extra"
              ? [...labels, strings ? "zz" : 99]
              : categories === "reversed"
                ? [...labels].reverse()
                : categories === "missing"
                  ? labels.slice(1)
                  : undefined;
        return { args: [r1, r2], options: optionsOf({ weights, categories: cats }) };
      });
    }),
  kendallTauB: fc
    .record({ n: fc.integer({ min: 0, max: 30 }), extra: mostly(fc.constant(0), fc.constant(1)) })
    .chain(({ n, extra }) => {
      const elem = fc.oneof(fc.integer({ min: 0, max: 4 }), value, score); // small integers make ties
      return fc.tuple(sample(n, n, elem), sample(n + extra, n + extra, elem));
    })
    .map(([x, y]) => ({ args: [x, y] })),
  fleissKappa: fc
    .record({
      subjects: mostly(fc.integer({ min: 1, max: 12 }), fc.constant(0)),
      k: fc.integer({ min: 1, max: 5 }),
      raters: mostly(fc.integer({ min: 2, max: 8 }), fc.constant(1)),
      noise: mostly(fc.constant(0), fc.constantFrom(1, 2, 3)),
      scale: fc.oneof({ arbitrary: fc.constant(1), weight: 8 }, { arbitrary: fc.constantFrom(2 ** 60, 1e160, 1e200), weight: 1 }),
    })
    .chain(({ subjects, k, raters, noise, scale }) =>
      fc.array(fc.array(fc.nat({ max: k - 1 }), { minLength: raters, maxLength: raters }), { minLength: subjects, maxLength: subjects }).map((votes) => {
        const table = votes.map((v) => {
          const row = new Array<number>(k).fill(0);
          for (const c of v) row[c] += 1;
          return row.map((x) => x * scale); // huge scales: Python's int products overflowed
        });
        if (noise === 1 && table.length > 0) table[0][0] += 1; // different rater counts (or fine if one subject)
        if (noise === 2 && table.length > 0) table[table.length - 1] = table[table.length - 1].slice(1); // ragged
        if (noise === 3 && table.length > 0) table[0][0] = -1;
        return { args: [table] };
      }),
    ),
  startVsEnd: fc
    .record({
      len: mostly(fc.integer({ min: 3, max: 60 }), fc.constantFrom(0, 1, 2)),
      w: fc.nat(),
      wild: mostly(fc.constant(0), fc.constantFrom(1, 2)),
      flat: fc.nat({ max: 9 }),
    })
    .chain(({ len, w, wild, flat }) => {
      const half = Math.max(1, Math.floor(len / 2));
      const window = wild === 1 ? half + 1 : wild === 2 ? 0 : 1 + (w % half);
      // a constant or linear series (no spread in the differences) now and then; values near the
      // float range among ordinary ones (sums and differences overflow: issue 31) now and then
      const huge = fc.constantFrom(1e308, -1e308, 1e300, -1e200, 1.7e308);
      const series =
        flat === 0
          ? fc.constant(Array.from({ length: len }, (_, i) => 0.1 + 0.01 * i))
          : flat === 1
            ? sample(len, len, fc.oneof({ weight: 4, arbitrary: score }, { weight: 1, arbitrary: huge }))
            : sample(len, len, fc.oneof(score, value));
      return fc.record({ series, window: fc.constant(window), confidence });
    })
    .map(({ series, ...o }) => ({ args: [series], options: optionsOf(o) })),
  trend: mostly(
    fc.oneof(sample(3, 40, fc.oneof(fc.integer({ min: 0, max: 5 }), value, score)), sample(3, 8, fc.oneof(bigInteger, fc.integer({ min: 0, max: 2 ** 20 })))),
    sample(0, 2),
  ).map((xs) => ({ args: [xs] })),
  tangoScoreInterval: fc
    .record({
      n: fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 3000 })),
      u: fc.double({ min: 0, max: 1, noNaN: true }),
      v: fc.double({ min: 0, max: 1, noNaN: true }),
      confidence,
      bad: mostly(fc.constant(0), fc.constantFrom(1, 2)),
    })
    .map(({ n, u, v, confidence, bad }) => {
      const b = Math.floor(u * n);
      const c = Math.floor(v * (n - b));
      const args = bad === 1 ? [b, n - b + 1, n] : bad === 2 ? [b + 0.5, c, n] : [b, c, n];
      return { args, options: optionsOf({ confidence }) };
    }),
  pairedProportionGate: fc
    .record({
      n: fc.integer({ min: 1, max: 600 }),
      u: fc.double({ min: 0, max: 0.4, noNaN: true }),
      v: fc.double({ min: 0, max: 1, noNaN: true }),
      threshold: mostly(fc.constantFrom(0.05, 0, 0.1), fc.constantFrom<unknown>(NaN)),
      alpha,
      bad: mostly(fc.constant(0), fc.constant(1)),
    })
    .map(({ n, u, v, bad, ...o }) => {
      const b = Math.floor(u * n);
      const c = Math.floor(v * (n - b));
      return { args: bad === 1 ? [b, n - b + 1, n] : [b, c, n], options: optionsOf(o) };
    }),
  // kept small: the Python port draws one uint32 per task per draw
  simulatedOperatingCharacteristic: fc
    .record({
      trueDelta: mostly(fc.oneof(finite(-0.2, 0.3), fc.constantFrom(0.05, 0)), fc.constantFrom<unknown>(NaN, 1.5)),
      discordance: mostly(fc.oneof(finite(0, 0.6), fc.constant(0)), fc.constantFrom<unknown>(-0.1, NaN)),
      n: mostly(fc.integer({ min: 1, max: 80 }), fc.constantFrom<unknown>(0, 2.5)),
      threshold: fc.constantFrom(0.05, 0, 0.1),
      alpha,
      draws: mostly(fc.integer({ min: 1, max: 40 }), fc.constantFrom<unknown>(0)),
      seed: fc.option(mostly(fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.constantFrom<unknown>(-1)), { nil: undefined }),
    })
    .map(({ trueDelta, discordance, n, ...o }) => ({ args: [trueDelta, discordance, n], options: optionsOf(o) })),
  operatingCharacteristic: fc
    .record({
      trueDelta: mostly(fc.oneof(finite(-0.3, 0.5), fc.constantFrom(0.05, 0.2, 0)), fc.constantFrom<unknown>(NaN, Infinity)),
      sdDiff: mostly(fc.oneof(finite(0, 1.5), fc.constant(0)), fc.constantFrom<unknown>(-0.1, NaN)),
      n: mostly(fc.integer({ min: 1, max: 5000 }), fc.constantFrom<unknown>(0, 2.5)),
      threshold: mostly(fc.constantFrom(0.05, 0.2, 0, -0.05), fc.constantFrom<unknown>(NaN)),
      alpha,
    })
    .map(({ trueDelta, sdDiff, n, ...o }) => ({ args: [trueDelta, sdDiff, n], options: optionsOf(o) })),
  passAtK: fc
    .integer({ min: 1, max: 300 })
    .chain((n) =>
      fc.record({
        n: fc.constant(n),
        c: fc.integer({ min: 0, max: n }),
        k: fc.integer({ min: 1, max: n }),
        bad: mostly(fc.constant(0), fc.constantFrom(1, 2, 3)),
      }),
    )
    .map(({ n, c, k, bad }) => ({ args: bad === 1 ? [n, n + 1, k] : bad === 2 ? [n, c, n + 1] : bad === 3 ? [n, c, 0] : [n, c, k] })),
  holmAdjust: mostly(
    fc.array(fc.oneof(finite(0, 1), fc.constantFrom(0, 1, 0.05, 0.01, 0.5)), { minLength: 1, maxLength: 12 }),
    fc.constantFrom<unknown>([], [0.5, 1.5], [NaN], [-0.1]),
  ).map((ps) => ({ args: [ps] })),
  clusteredMeanSE: fc
    .record({ n: fc.integer({ min: 0, max: 30 }), g: fc.integer({ min: 1, max: 6 }), noise: mostly(fc.constant(0), fc.constantFrom(1, 2)) })
    .chain(({ n, g, noise }) =>
      fc
        .tuple(sample(n, n, fc.oneof(score, value, fc.constantFrom(-1, 0, 1))), fc.array(fc.integer({ min: 0, max: g - 1 }), { minLength: n, maxLength: n }))
        .map(([xs, cs]) => {
          const clusters: unknown[] = cs.map((c) => `template/${c}`);
          if (noise === 1) clusters.push("extra");
          if (noise === 2 && clusters.length > 0) clusters[0] = 3;
          return { args: [xs, clusters] };
        }),
    ),
  kendallW: fc
    .record({
      m: mostly(fc.integer({ min: 2, max: 6 }), fc.constantFrom(0, 1)),
      n: mostly(fc.integer({ min: 2, max: 8 }), fc.constant(1)),
      perm: fc.boolean(),
      noise: mostly(fc.constant(0), fc.constantFrom(1, 2)),
    })
    .chain(({ m, n, perm, noise }) => {
      const row = perm
        ? fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n })
        : fc.array(fc.oneof(fc.integer({ min: 0, max: 3 }), score), { minLength: n, maxLength: n });
      return fc.array(row, { minLength: m, maxLength: m }).map((rows) => {
        const out: unknown[][] = rows.map((r) => [...r]);
        if (noise === 1 && out.length > 0) out[0].push(0); // ragged
        if (noise === 2 && out.length > 0 && out[0].length > 0) out[0][0] = NaN;
        return { args: [out] };
      });
    }),
  plannedPairedSd: fc
    .record({
      pBase: mostly(fc.oneof(finite(0, 1), fc.constantFrom(0, 1, 0.5)), fc.constantFrom<unknown>(-0.1, 1.1, NaN)),
      delta: mostly(fc.oneof(finite(-0.3, 0.3), fc.constantFrom(0, 0.05, -0.05)), fc.constantFrom<unknown>(Infinity, 2)),
      model: mostly(fc.constantFrom("conversions", "independent"), fc.constant("correlated")),
    })
    .map(({ pBase, delta, model }) => ({ args: [pBase, delta], options: { model } })),
  hamedRaoTrend: fc
    .record({
      xs: mostly(sample(3, 40, fc.oneof(fc.integer({ min: 0, max: 5 }), value, score)), sample(0, 2)),
      alpha: fc.option(mostly(finite(0.01, 0.3), fc.constantFrom<unknown>(0, 1)), { nil: undefined }),
    })
    .map(({ xs, alpha }) => ({ args: [xs], options: optionsOf({ alpha }) })),
  Rng: fc
    .record({
      seed,
      count: fc.integer({ min: 1, max: 20 }),
      n: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 4294967296 }), fc.constantFrom(2147483649, 3000000000)),
    })
    .map(({ seed, count, n }) => ({ args: [seed, count, n] })),
};

/** The random vector file for one function: `runs` draws from `seed`, run through the TS code. */
export function randomVectorFile(fn: string, runs: number, seed: number): VectorFile & { source: string; seed: number } {
  const arb = ARBITRARIES[fn];
  if (arb === undefined) throw new Error(`no arbitrary for ${fn}`);
  const draws = fc.sample(arb, { numRuns: runs, seed });
  const cases = draws.map((d, i) => makeCase(fn, `random #${i}`, d.args, d.options));
  return { ...makeFile(fn, cases), source: "random", seed };
}

/** Function names with random inputs (all of FUNCTIONS but rewardNames). */
export function randomFunctions(): string[] {
  return Object.keys(FUNCTIONS).filter((fn) => fn !== "rewardNames");
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const arg = (name: string, fallback: string): string => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : fallback;
  };
  const dir = resolve(arg("--out", "parity-random"));
  const runs = Number(arg("--runs", "1000"));
  const seed = Number(arg("--seed", "20261129"));
  mkdirSync(dir, { recursive: true });
  const fns = randomFunctions();
  fns.forEach((fn, i) => {
    const file = randomVectorFile(fn, runs, (seed + i * 7919) >>> 0);
    const path = join(dir, `${fn}.json`);
    writeFileSync(`${path}.tmp`, formatVectorFile(file));
    renameSync(`${path}.tmp`, path);
  });
  console.log(`wrote ${runs} random cases for each of ${fns.length} functions (seed ${seed}) to ${dir}`);
}
