/**
 * Attribution: docs/attribution.md's "reading the curves" table as data, applied to one run.
 *
 * Every row is a conjunction of its columns ("any" = no condition) over the curve's features
 * (curve-features.ts) and the downstream signal (whether a rise carried over to the test split);
 * the report lists every row that fired with the numbers that made it fire.
 *
 * Before any curve row fires: a curve too short or too noisy to carry a trend is "undetermined"
 * (its own row, nothing else about the curve fires); a downstream CI that includes 0 at n below
 * the required n is "underpowered", not reward hacking; a significant downstream regression is
 * its own row and rules out "healthy", as do KL spikes. The constant-answer rows read what the
 * eval's base and adapter answer (report/answer-analysis.ts), each variant on its own; an adapter
 * with a constant answer is never "healthy".
 */
import { KL_SPIKE_FACTOR, KL_SPIKE_MADS, KL_SPIKE_MIN, KL_SPIKE_WINDOW, MIN_STEPS_FOR_SHAPE, type CurveFeatures, type CurveShape } from "./curve-features.js";
import type { DownstreamSignal } from "../verdict/verdict.js";
import { CONSTANT_ANSWER_SHARE, FORMAT_FAILURE_SHARE, NO_ANSWER, type AnswerDistribution } from "../eval/answers.js";
import { NO_ANSWER_SIGNAL, type AnswerSignal } from "./answer-analysis.js";
import { CURVE_THRESHOLDS } from "./thresholds.js";

// ---------------------------------------------------------------------------------------------
// Thresholds

/** KL "~0": the end-window mean KL is below this (nats/token; the adapter has barely moved). */
export const KL_NEAR_ZERO = 1e-3;
/** KL "high": the end-window mean KL is above this (policy far from the reference for beta ~0.04). */
export const KL_HIGH = 0.1;
/** KL "moderate" for the healthy row: the end-window mean KL at most this. The demo's own recipe
 *  ends at 0.13 (seed 1, test/fixtures/demo-kl-seed1.json) to 0.22 (the run issue 44 reported),
 *  over KL_HIGH, on runs the verdict confirms; lr 5e-3 on the same recipe collapses at ~6. */
export const KL_HEALTHY_MAX = 0.5;
/** frac_reward_zero_std "~1": at least this run mean (almost every group has no reward variance). */
export const FRAC_ZERO_STD_HIGH = CURVE_THRESHOLDS.zero_std_warn;
/** frac_reward_zero_std "low": at most this run mean. */
export const FRAC_ZERO_STD_LOW = 0.5;
/** completions/clipped_ratio "~1": end-window mean at least this (almost every completion truncated). */
export const CLIPPED_HIGH = CURVE_THRESHOLDS.clipped_ratio_warn;

// ---------------------------------------------------------------------------------------------
// The table

/** The eval is too small to tell: its CI includes 0 and n < the required n. */
export function underpowered(d: DownstreamSignal): boolean {
  return d.significant === false && d.n != null && d.requiredN != null && d.n < d.requiredN;
}

/** Whether the downstream decision rejects 0, in words true to the interval: the governing test
 *  may not reject 0 while the printed CI excludes it (a test that governs over the interval). */
export function significanceWords(d: DownstreamSignal): string {
  if (d.significant) return "the decision excludes 0";
  const ciExcludes = d.lower != null && d.upper != null && (d.lower > 0 || d.upper < 0);
  return ciExcludes ? "the governing test does not reject 0 (though the CI excludes it)" : "CI includes 0";
}

/** A significant downstream regression: the decision excludes 0 on the negative side. */
export function regressed(d: DownstreamSignal): boolean {
  return d.significant === true && d.upper != null && d.upper < 0;
}

export interface Check {
  fired: boolean;
  /** each condition of the row, "yes:" or "no:", with the numbers it was decided on */
  evidence: string;
  /** how many of the row's conditions held */
  met: number;
  /** the conditions that did not hold, with their numbers */
  missed: string[];
}

export interface AttributionRow {
  curve: string;
  kl: string;
  fracZeroStd: string;
  likelyCause: string;
  nextChange: string;
  check: (f: CurveFeatures, d: DownstreamSignal, a: AnswerSignal) => Check;
}

type Condition = [boolean, string];

function all(...conditions: Condition[]): Check {
  return {
    fired: conditions.every(([ok]) => ok),
    evidence: conditions.map(([ok, s]) => `${ok ? "yes" : "no"}: ${s}`).join("; "),
    met: conditions.filter(([ok]) => ok).length,
    missed: conditions.filter(([ok]) => !ok).map(([, s]) => s),
  };
}

/** The reward rose: on the training curve, or on the held-out prompts. */
const roseCondition = (f: CurveFeatures, d: DownstreamSignal): Condition => {
  const curveRose = f.reward !== null && (f.reward.shape === "rising" || f.reward.shape === "early plateau");
  const heldOut = d.heldOutRose === null ? "no held-out result" : `held-out reward CI ${d.heldOutRose ? "above 0" : "includes 0"}`;
  return [curveRose || d.heldOutRose === true, `curve ${f.reward?.shape ?? "not logged"}, ${heldOut}`];
};

const shapeIs = (f: CurveFeatures, ...shapes: CurveShape[]): Condition => [
  f.reward !== null && shapes.includes(f.reward.shape),
  f.reward ? `curve ${f.reward.shape}` : "no reward logged",
];

/** A KL condition on the end-window mean: `test` decides, `want` says the threshold in words. */
const klIs = (f: CurveFeatures, test: (kl: number) => boolean, want: string): Condition =>
  f.kl ? [test(f.kl.endMean), `kl ${f4(f.kl.endMean)} (want ${want})`] : [false, "kl not logged"];

const fracIs = (f: CurveFeatures, test: (z: NonNullable<CurveFeatures["fracZeroStd"]>) => boolean, what: string): Condition =>
  f.fracZeroStd
    ? [test(f.fracZeroStd), what.replace("$", f.fracZeroStd.mean.toFixed(2)).replace("#", f.fracZeroStd.direction)]
    : [false, "frac_reward_zero_std not logged"];

/** "answers money_mule on 264/264 tasks (100%)" */
function answerText(d: AnswerDistribution): string {
  const t = d.topLabel ?? d.top;
  return `answers ${t.label} on ${t.count}/${d.tasks} tasks (${(t.share * 100).toFixed(0)}%)`;
}

const formatCondition = (d: AnswerDistribution | null, who: string): Condition =>
  d && !d.needsTag
    ? [false, `the primary grader needs no <answer> tag (an open answer is read as given), so the ${who} has no answer format to lose`]
    : d
      ? [
          d.formatFailure,
          `${who} gives no <answer> tag (${NO_ANSWER}) on ${Math.round(d.noAnswerShare * d.tasks)}/${d.tasks} tasks (${(d.noAnswerShare * 100).toFixed(0)}%; want > ${(FORMAT_FAILURE_SHARE * 100).toFixed(0)}%)`,
        ]
      : [false, `no ${who} answers (open-answer task set or no eval)`];

const constantCondition = (d: AnswerDistribution | null, who: string): Condition =>
  d
    ? [d.constant, `${who} ${answerText(d)} (want >= ${(CONSTANT_ANSWER_SHARE * 100).toFixed(0)}%), ${d.distinct} distinct answer(s)`]
    : [false, `no ${who} answers (open-answer task set or no eval)`];

/** The rows judged on one side's answers (the base's or the adapter's); every other column is "any".
 *  [side, condition, curve, likely cause, next change] */
const ANSWER_ROWS: readonly ["base" | "adapter", (d: AnswerDistribution | null, who: string) => Condition, string, string, string][] = [
  [
    "base",
    constantCondition,
    "any; the base answers one label on >= 90% of tasks",
    "constant answer (base): the base learned the label prior, not the mapping from input to label",
    "a base with input-dependent answers (pass@k > pass@1 on the task), more signal per step",
  ],
  [
    "adapter",
    constantCondition,
    "any; the adapter answers one label on >= 90% of tasks",
    "constant answer (adapter): training moved the one label the model says, not a mapping from input to label",
    "more signal per step (raise G or prompts per step), a base with input-dependent answers",
  ],
  [
    "base",
    formatCondition,
    "any; most of the base's answers lack the answer format",
    "format failure (base): most answers carry no <answer> tag, so the grader reads no label (not a label prior)",
    "teach the format first: the format instruction in the prompt, a format reward or partial credit, max_completion_length if answers are cut off",
  ],
  [
    "adapter",
    formatCondition,
    "any; most of the adapter's answers lack the answer format",
    "format failure (adapter): training lost the answer format, so the grader reads no label",
    "a format reward beside the task reward, a higher beta, fewer steps; check max_completion_length",
  ],
];

function answerRow([who, condition, curve, likelyCause, nextChange]: (typeof ANSWER_ROWS)[number]): AttributionRow {
  return { curve, kl: "any", fracZeroStd: "any", likelyCause, nextChange, check: (_f, _d, a) => all(condition(a[who], who)) };
}

/** docs/attribution.md's table, one entry per row, in its order. */
export const ATTRIBUTION_TABLE: readonly AttributionRow[] = [
  {
    curve: "rises steadily",
    kl: "moderate",
    fracZeroStd: "falling",
    likelyCause: "healthy",
    nextChange: "more data / steps",
    check: (f, d, a) =>
      all(
        shapeIs(f, "rising"),
        klIs(f, (kl) => kl >= KL_NEAR_ZERO && kl <= KL_HEALTHY_MAX, `${KL_NEAR_ZERO} to ${KL_HEALTHY_MAX}`),
        fracIs(f, (z) => z.direction === "falling", "frac_reward_zero_std #"),
        f.kl ? [f.kl.spikes === 0, `${f.kl.spikes} KL spike(s) (want 0)`] : [false, "kl not logged"],
        [!regressed(d), regressed(d) ? `downstream ${d.text}: a significant regression` : "no significant downstream regression"],
        // only a closed-label eval has answers to read: a constant adapter answer is never healthy
        ...(a.adapter ? [[!a.adapter.constant, `adapter ${answerText(a.adapter)}${a.adapter.constant ? ": a constant answer" : ""}`] as Condition] : []),
      ),
  },
  {
    curve: "flat from step 0",
    kl: "~0",
    fracZeroStd: "~1",
    likelyCause: "reward too sparse, G too small, task too hard",
    nextChange: "raise G, partial credit, easier curriculum",
    check: (f) =>
      all(
        shapeIs(f, "flat"),
        klIs(f, (kl) => kl < KL_NEAR_ZERO, `< ${KL_NEAR_ZERO}`),
        fracIs(f, (z) => z.mean >= FRAC_ZERO_STD_HIGH, `frac_reward_zero_std mean $ (want >= ${FRAC_ZERO_STD_HIGH})`),
      ),
  },
  {
    curve: "flat from step 0",
    kl: "~0",
    fracZeroStd: "low",
    likelyCause: "lr too low, beta too high, adapter not training",
    nextChange: "raise lr, lower beta, check trainable params",
    check: (f) =>
      all(
        shapeIs(f, "flat"),
        klIs(f, (kl) => kl < KL_NEAR_ZERO, `< ${KL_NEAR_ZERO}`),
        fracIs(f, (z) => z.mean <= FRAC_ZERO_STD_LOW, `frac_reward_zero_std mean $ (want <= ${FRAC_ZERO_STD_LOW})`),
      ),
  },
  {
    curve: "early plateau",
    kl: "low",
    fracZeroStd: "rising",
    likelyCause: "grader too strict, saturation",
    nextChange: "check grader, harder tasks",
    check: (f) =>
      all(
        shapeIs(f, "early plateau"),
        klIs(f, (kl) => kl <= KL_HIGH, `<= ${KL_HIGH}`),
        fracIs(f, (z) => z.direction === "rising", "frac_reward_zero_std #"),
      ),
  },
  {
    curve: "early plateau",
    kl: "high",
    fracZeroStd: "any",
    likelyCause: "policy drifting, reward hacking",
    nextChange: "raise beta, tighten grader",
    check: (f) =>
      all(
        shapeIs(f, "early plateau"),
        klIs(f, (kl) => kl > KL_HIGH, `> ${KL_HIGH}`),
      ),
  },
  {
    curve: "rises, downstream delta not significant",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "reward hacking or loose grader",
    nextChange: "kappa check, tighten grader",
    check: (f, d) =>
      all(
        roseCondition(f, d),
        [d.significant === false, d.significant === null ? "no downstream eval" : `downstream ${d.text}: ${significanceWords(d)}`],
        [
          !underpowered(d),
          underpowered(d)
            ? `n=${d.n} < required n=${d.requiredN}: underpowered, not evidence of hacking`
            : d.n != null && d.requiredN != null
              ? `n=${d.n} >= required n=${d.requiredN}`
              : "power unknown",
        ],
      ),
  },
  {
    curve: "rises, downstream CI includes 0 at n < required n",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "underpowered: the test split is too small to tell",
    nextChange: "more test tasks (n >= the required n; see `agent plan`), not a grader change",
    check: (f, d) =>
      all(roseCondition(f, d), [
        underpowered(d),
        d.significant === null ? "no downstream eval" : `downstream ${d.text}: n=${d.n ?? "?"} vs required n=${d.requiredN ?? "?"}`,
      ]),
  },
  {
    curve: "any, downstream delta significantly below 0",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "regression: the adapter is worse than the base on the test split",
    nextChange: "read the tasks it lost; check the grader and the train/test template overlap; fewer steps or a lower lr",
    check: (_f, d) =>
      all([
        regressed(d),
        d.significant === null ? "no downstream eval" : `downstream ${d.text}: ${regressed(d) ? "significantly below 0" : "not a significant regression"}`,
      ]),
  },
  {
    curve: "too short / too noisy to tell",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "undetermined: the curve cannot carry a trend",
    nextChange: `more logged steps (>= ${MIN_STEPS_FOR_SHAPE}) or less noise per step (larger batch, more generations)`,
    check: (f) =>
      all([
        f.reward !== null && f.reward.shape === "undetermined",
        f.reward ? `curve ${f.reward.shape}${f.reward.undeterminedWhy ? ` (${f.reward.undeterminedWhy})` : ""}` : "no reward logged",
      ]),
  },
  {
    curve: "collapses / oscillates",
    kl: "spikes",
    fracZeroStd: "any",
    likelyCause: "lr too high, clip too loose",
    nextChange: "lower lr, epsilon",
    check: (f) =>
      all(
        shapeIs(f, "collapses / oscillates"),
        f.kl
          ? [
              f.kl.spikes > 0,
              `${f.kl.spikes} KL spike(s) (> ${KL_SPIKE_FACTOR}x the median of the previous ${KL_SPIKE_WINDOW} steps floored at ${KL_SPIKE_MIN}, and > ${KL_SPIKE_MADS} median absolute deviations over it)`,
            ]
          : [false, "kl not logged"],
      ),
  },
  {
    curve: "clipped_ratio ~ 1",
    kl: "any",
    fracZeroStd: "any",
    likelyCause: "completions truncated",
    nextChange: "raise max_completion_length",
    check: (f) =>
      all(
        f.clippedRatio
          ? [f.clippedRatio.endMean >= CLIPPED_HIGH, `clipped_ratio ${f.clippedRatio.endMean.toFixed(2)} (want >= ${CLIPPED_HIGH})`]
          : [false, "completions/clipped_ratio not logged"],
      ),
  },
  ...ANSWER_ROWS.map(answerRow),
];

export interface RowResult extends Check {
  row: AttributionRow;
}

/** Apply every row of the table; the result keeps the table's order. */
export function attribute(f: CurveFeatures, d: DownstreamSignal, a: AnswerSignal = NO_ANSWER_SIGNAL): RowResult[] {
  return ATTRIBUTION_TABLE.map((row) => ({ row, ...row.check(f, d, a) }));
}

/** Curve-pattern rows (a KL column other than "any": the shape, KL and frac_reward_zero_std
 *  rows) that did not fire but held every condition except one. The downstream, undetermined
 *  and clipped rows are alarms: missing their condition means the alarm is quiet, not that the
 *  run is near them. When no row fires, the near rows say what the run looks like: a rising
 *  curve with KL spikes misses "healthy" only on the spikes and "lr too high, clip too loose"
 *  only on the curve shape. */
export function nearMisses(results: readonly RowResult[]): RowResult[] {
  return results.filter((r) => !r.fired && r.row.kl !== "any" && r.missed.length === 1 && r.met >= 1);
}

const f4 = (x: number) => (Math.abs(x) < 1e-3 && x !== 0 ? x.toExponential(1) : x.toFixed(4));
