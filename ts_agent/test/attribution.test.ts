import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

import { ATTRIBUTION_TABLE, CLIPPED_HIGH, FRAC_ZERO_STD_HIGH, attribute, nearMisses } from "../src/agent/report/attribution.js";
import type { DownstreamSignal } from "../src/agent/verdict/verdict.js";
import { KL_SPIKE_FACTOR, KL_SPIKE_MIN, curveFeatures, describeFeatures, type StepMetrics } from "../src/agent/report/curve-features.js";
import { CURVE_THRESHOLDS, isKlSpike, klLocalLevel, klLocalSpread } from "../src/agent/report/thresholds.js";
import { mulberry32 } from "../src/task-sets/task-rng.js";
import { answerDistribution, labelSetOf, type AnswerDistribution } from "../src/agent/eval/answers.js";
import { TYPOLOGIES } from "../src/task-sets/typologies.js";
import type { AnswerSignal } from "../src/agent/report/answer-analysis.js";

const N = 60;

/** Synthetic TRL metrics: each key is a function of the step index (0-based) and a noise draw in [-1, 1). */
function steps(series: Record<string, (i: number, noise: number) => number>, seed = 7, n = N): StepMetrics[] {
  const rand = mulberry32(seed);
  return Array.from({ length: n }, (_, i) => {
    const metrics: Record<string, number> = {};
    for (const [k, f] of Object.entries(series)) metrics[k] = f(i, 2 * rand() - 1);
    return { step: i + 1, metrics };
  });
}

const NO_EVAL: DownstreamSignal = { heldOutRose: null, significant: null, text: "" };

function fired(s: StepMetrics[], d: DownstreamSignal = NO_EVAL): string[] {
  return attribute(curveFeatures(s), d)
    .filter((r) => r.fired)
    .map((r) => `${r.row.curve} | ${r.row.kl} | ${r.row.fracZeroStd}`);
}

const healthy = steps({
  reward: (i, e) => 0.2 + 0.4 * (i / (N - 1)) + 0.03 * e,
  kl: (i) => 0.005 + 0.02 * (i / (N - 1)),
  frac_reward_zero_std: (i, e) => 0.6 - 0.4 * (i / (N - 1)) + 0.02 * e,
  "completions/clipped_ratio": () => 0.1,
});

const plateau = (kl: number) =>
  steps({
    reward: (i, e) => 0.2 + 0.4 * Math.min(1, i / 15) + 0.01 * e,
    kl: () => kl,
    frac_reward_zero_std: (i, e) => 0.2 + 0.6 * (i / (N - 1)) + 0.02 * e,
    "completions/clipped_ratio": () => 0.05,
  });

describe("the attribution table, row by row", () => {
  test("the table is docs/attribution.md's, in order", () => {
    assert.deepEqual(
      ATTRIBUTION_TABLE.map((r) => r.likelyCause),
      [
        "healthy",
        "reward too sparse, G too small, task too hard",
        "lr too low, beta too high, adapter not training",
        "grader too strict, saturation",
        "policy drifting, reward hacking",
        "reward hacking or loose grader",
        "underpowered: the test split is too small to tell",
        "regression: the adapter is worse than the base on the test split",
        "undetermined: the curve cannot carry a trend",
        "lr too high, clip too loose",
        "completions truncated",
        "constant answer (base): the base learned the label prior, not the mapping from input to label",
        "constant answer (adapter): training moved the one label the model says, not a mapping from input to label",
        "format failure (base): most answers carry no <answer> tag, so the grader reads no label (not a label prior)",
        "format failure (adapter): training lost the answer format, so the grader reads no label",
      ],
    );
  });

  test("rises steadily, moderate KL, falling frac_reward_zero_std: healthy", () => {
    const f = curveFeatures(healthy);
    assert.equal(f.reward!.shape, "rising");
    assert.equal(f.fracZeroStd!.direction, "falling");
    assert.deepEqual(fired(healthy), ["rises steadily | moderate | falling"]);
    const row = attribute(f, NO_EVAL)[0];
    assert.equal(
      row.evidence,
      "yes: curve rising; yes: kl 0.0231 (want 0.001 to 0.5); yes: frac_reward_zero_std falling; yes: 0 KL spike(s) (want 0); yes: no significant downstream regression",
    );
    assert.match(describeFeatures(f)[0], /^reward: rising; start 0\.\d{3} -> end 0\.\d{3} \(change/);
  });

  test("flat from step 0 with KL ~0 and every group zero-variance: reward too sparse", () => {
    const s = steps({ reward: () => 0, kl: () => 0, frac_reward_zero_std: () => 1, "completions/clipped_ratio": () => 0.2 });
    assert.equal(curveFeatures(s).reward!.shape, "flat");
    assert.deepEqual(fired(s), ["flat from step 0 | ~0 | ~1"]);
  });

  test("flat from step 0 with KL ~0 and low frac_reward_zero_std: the adapter is not learning", () => {
    const s = steps({ reward: (_i, e) => 0.3 + 0.05 * e, kl: () => 1e-4, frac_reward_zero_std: () => 0.2 });
    assert.equal(curveFeatures(s).reward!.shape, "flat");
    assert.deepEqual(fired(s), ["flat from step 0 | ~0 | low"]);
  });

  test("early plateau with low KL and rising frac_reward_zero_std: grader too strict / saturation", () => {
    const f = curveFeatures(plateau(0.01));
    assert.equal(f.reward!.shape, "early plateau");
    assert.equal(f.fracZeroStd!.direction, "rising");
    assert.deepEqual(fired(plateau(0.01)), ["early plateau | low | rising"]);
  });

  test("early plateau with high KL: policy drifting", () => {
    assert.deepEqual(fired(plateau(0.3)), ["early plateau | high | any"]);
  });

  test("rises but the downstream delta is not significant: reward hacking or loose grader", () => {
    const notSig: DownstreamSignal = { heldOutRose: true, significant: false, text: "+1.0 pp (95% CI -3.0 to +5.0 pp), n=264" };
    assert.deepEqual(fired(healthy, notSig), ["rises steadily | moderate | falling", "rises, downstream delta not significant | any | any"]);
    const row = attribute(curveFeatures(healthy), notSig)[5];
    assert.equal(
      row.evidence,
      "yes: curve rising, held-out reward CI above 0; yes: downstream +1.0 pp (95% CI -3.0 to +5.0 pp), n=264: CI includes 0; yes: power unknown",
    );
    assert.deepEqual(fired(healthy, { ...notSig, significant: true }), ["rises steadily | moderate | falling"]);
  });

  test("collapses with KL spikes: lr too high", () => {
    const s = steps({
      reward: (i, e) => (i < 20 ? 0.2 + 0.4 * (i / 20) : i < 40 ? 0.6 - 0.5 * ((i - 20) / 20) : 0.1) + 0.01 * e,
      kl: (i) => (i === 25 || i === 26 ? 0.5 : 0.01),
      frac_reward_zero_std: () => 0.5,
    });
    const f = curveFeatures(s);
    assert.equal(f.reward!.shape, "collapses / oscillates");
    assert.equal(f.kl!.spikes, 2);
    assert.deepEqual(f.kl!.spikeSteps, [26, 27]);
    assert.deepEqual(fired(s), ["collapses / oscillates | spikes | any"]);
  });

  test("clipped_ratio ~ 1: completions truncated (alongside the curve's own row)", () => {
    const s = steps({ reward: () => 0, kl: () => 0, frac_reward_zero_std: () => 1, "completions/clipped_ratio": () => 1 });
    assert.deepEqual(fired(s), ["flat from step 0 | ~0 | ~1", "clipped_ratio ~ 1 | any | any"]);
  });

  test("without kl logged, no KL-conditioned row fires and the evidence says why", () => {
    const s = steps({ reward: () => 0, frac_reward_zero_std: () => 1 });
    assert.deepEqual(fired(s), []);
    assert.match(attribute(curveFeatures(s), NO_EVAL)[1].evidence, /no: kl not logged/);
    assert.match(describeFeatures(curveFeatures(s))[1], /kl: not logged \(TRL logs it only when beta > 0\)/);
  });

  test("a run too short for a shape is undetermined: only that row fires", () => {
    const s = steps({ reward: (i) => i, kl: () => 0.01, frac_reward_zero_std: () => 0.5 }, 1, 4);
    assert.equal(curveFeatures(s).reward!.shape, "undetermined");
    assert.deepEqual(fired(s), ["too short / too noisy to tell | any | any"]);
  });

  test("a long but noisy curve is undetermined (too noisy), not flat", () => {
    const s = steps({ reward: (_i, e) => 0.3 + 0.15 * e, kl: () => 1e-4, frac_reward_zero_std: () => 0.2 });
    const r = curveFeatures(s).reward!;
    assert.equal(r.shape, "undetermined");
    assert.match(r.undeterminedWhy, /too noisy/);
  });

  test("KL spikes rule out healthy", () => {
    const spiky = healthy.map((x, i) => (i % 10 === 5 ? { step: x.step, metrics: { ...x.metrics, kl: 0.76 } } : x));
    assert.ok(!fired(spiky).includes("rises steadily | moderate | falling"));
  });

  test("a rising curve with KL spikes fires no row; the near rows are healthy (but for the spikes) and lr too high (but for the shape)", () => {
    const spiky = healthy.map((x, i) => (i % 10 === 5 ? { step: x.step, metrics: { ...x.metrics, kl: 0.76 } } : x));
    const good: DownstreamSignal = { heldOutRose: true, significant: true, text: "+27.3 pp (95% CI +22.3 to +32.9 pp), n=264", n: 264, requiredN: 22 };
    for (const d of [NO_EVAL, good]) {
      const results = attribute(curveFeatures(spiky), d);
      assert.deepEqual(
        results.filter((r) => r.fired),
        [],
      );
      const near = nearMisses(results);
      assert.deepEqual(
        near.map((r) => r.row.likelyCause),
        ["healthy", "lr too high, clip too loose"],
      );
      // 6 steps at 0.76, the first (step 6) with fewer than KL_SPIKE_WINDOW steps before it: not judged
      assert.deepEqual(near[0].missed, ["5 KL spike(s) (want 0)"]);
      assert.deepEqual(near[1].missed, ["curve rising"]);
    }
    // a run whose row fires has no near rows listed by the report; a healthy run's alarms are never "near"
    assert.deepEqual(
      nearMisses(attribute(curveFeatures(healthy), good)).map((r) => r.row.likelyCause),
      [],
    );
  });
});

describe("the curve shape on simulated curves (per-step reward sd 0.08, as a batch of 32 binary rewards)", () => {
  function simulate(seed: number, runs: number, n: number, mean: (i: number) => number) {
    const rand = mulberry32(seed);
    const gauss = () => Math.sqrt(-2 * Math.log(rand() || 1e-12)) * Math.cos(2 * Math.PI * rand());
    return Array.from({ length: runs }, () => {
      const c = curveFeatures(Array.from({ length: n }, (_, i) => ({ step: i + 1, metrics: { reward: mean(i) + 0.08 * gauss(), kl: 0.01 } }))).reward!;
      return { shape: c.shape, fell: c.changeCi.upper < 0 };
    });
  }

  test("a flat noisy curve is rarely called a collapse by its highest window (was 16% of 200, before the peak had to be shown)", () => {
    const flat = simulate(5, 200, 60, () => 0.3);
    const byPeak = flat.filter((x) => x.shape === "collapses / oscillates" && !x.fell).length / flat.length;
    assert.ok(byPeak <= 0.08, `flat curves called a collapse by the peak rule: ${byPeak}`);
  });

  test("a real rise-and-fall of +0.2 over 30 steps is still a collapse (88% of 200; 95% before, with an interval that under-covered)", () => {
    const bump = simulate(6, 200, 60, (i) => 0.2 + 0.2 * Math.max(0, 1 - Math.abs(i - 30) / 15));
    const found = bump.filter((x) => x.shape === "collapses / oscillates").length / bump.length;
    assert.ok(found >= 0.8, `bumps found: ${found}`);
  });
});

/** Trendless AR(1) curves at the demo's noise: reward 0.3 + x_t, x stationary with sd 0.125 (a
 *  batch of 16 binary rewards), x_t = phi x_{t-1} + sqrt(1 - phi^2) 0.125 e_t. */
function trendless(seed: number, runs: number, n: number, phi: number): number[][] {
  const rand = mulberry32(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(rand() || 1e-12)) * Math.cos(2 * Math.PI * rand());
  return Array.from({ length: runs }, () => {
    let x = 0.125 * gauss();
    return Array.from({ length: n }, () => {
      const v = 0.3 + x;
      x = phi * x + Math.sqrt(1 - phi * phi) * 0.125 * gauss();
      return v;
    });
  });
}

describe("calibrated on trendless curves (seeded simulations; rates before this change in the names)", () => {
  const asSteps = (r: number[]): StepMetrics[] => r.map((v, i) => ({ step: i + 1, metrics: { reward: v } }));
  // every length the attribution accepts, from MIN_STEPS_FOR_SHAPE (the windows grow with n)
  for (const [n, phi, before] of [
    [20, 0, 30],
    [20, 0.5, 50],
    [30, 0.5, 32],
    [40, 0, 16],
    [60, 0.5, 26],
    [120, 0.5, 20],
  ] as const) {
    test(`the start-vs-end 95% interval covers the true change 0 >= 93% of the time: n=${n}, AR(1) phi ${phi} (bootstrap missed ~${before}%)`, () => {
      const curves = trendless(100 + n + 10 * phi, 300, n, phi);
      const covered = curves.filter((r) => {
        const c = curveFeatures(asSteps(r)).reward!.changeCi;
        return c.lower <= 0 && c.upper >= 0;
      }).length;
      // measured 95-100%; 300 curves: a binomial sd of 1.3 points at 95%
      assert.ok(covered / curves.length >= 0.93, `covered ${covered}/${curves.length}`);
    });
  }
  for (const [n, phi, before] of [
    [40, 0, [37, 8]],
    [40, 0.5, [70, 16]],
    [40, 0.9, [61, 27]],
    [60, 0.9, [62, 30]],
  ] as const) {
    test(`"collapses / oscillates" and "rising" each fire on <= 7.5%: n=${n}, AR(1) phi ${phi} (were ~${before[0]}% and ~${before[1]}%)`, () => {
      const shapes = trendless(200 + n + 10 * phi, 500, n, phi).map((r) => curveFeatures(asSteps(r)).reward!.shape);
      const rate = (s: (x: string) => boolean) => shapes.filter(s).length / shapes.length;
      const collapse = rate((x) => x === "collapses / oscillates");
      const rising = rate((x) => x === "rising" || x === "early plateau");
      // measured (2000 curves each) at most 4.7% and 3.3%: 2 binomial sds (1.9 points at 500) below 7.5%
      assert.ok(collapse <= 0.075, `collapses / oscillates on ${(collapse * 100).toFixed(1)}%`);
      assert.ok(rising <= 0.075, `rising / early plateau on ${(rising * 100).toFixed(1)}%`);
    });
  }
});

describe("KL spikes against the recent local level", () => {
  test("a smooth KL ramp 0 -> 0.1 counts 0 spikes (22 against the whole-run median); a jump on it still counts", () => {
    const ramp = steps({ reward: (i) => 0.2 + 0.005 * i, kl: (i) => 0.1 * (i / (N - 1)) });
    assert.equal(curveFeatures(ramp).kl!.spikes, 0);
    const jump = ramp.map((x, i) => (i === 40 ? { step: x.step, metrics: { ...x.metrics, kl: 0.5 } } : x));
    assert.deepEqual(curveFeatures(jump).kl!.spikeSteps, [41]);
  });
  test("the local level is the upper median of the previous KL_SPIKE_WINDOW steps, none before that many", () => {
    assert.equal(klLocalLevel([0.1, 0.2], 10), null);
    assert.equal(klLocalLevel([0.3, 0.1, 0.2], 10), null);
    assert.equal(klLocalLevel([0.3, 0.1, 0.2], 3), 0.2);
    assert.equal(klLocalSpread([0.3, 0.1, 0.2, 0.9], 3), 0.1);
    assert.equal(klLocalLevel([9, 9, 9, 0.1, 0.2, 0.3, 0.4], 4), 0.3);
    assert.equal(isKlSpike(0.5, Array(10).fill(0.01)), true);
    assert.equal(isKlSpike(0.5, Array(9).fill(0.01)), false, "judged only with a full window before it");
    assert.equal(isKlSpike(0.06, Array(10).fill(0.001)), false, "a ratio against a near-0 level: under kl_spike_factor x kl_spike_min");
  });
  test("the demo's own KL curve (seed 1) has no spike; a KL of 6 on it (lr 5e-3's collapse) is one (issue 44)", () => {
    const kl: number[] = JSON.parse(readFileSync(new URL("./fixtures/demo-kl-seed1.json", import.meta.url), "utf8")).kl;
    const demo = kl.map((x, i) => ({ step: i + 1, metrics: { kl: x, reward: 0.2 + 0.002 * i } }));
    assert.deepEqual(curveFeatures(demo).kl!.spikeSteps, []);
    const collapsed = demo.map((x, i) => (i === 100 ? { step: x.step, metrics: { ...x.metrics, kl: 6 } } : x));
    assert.deepEqual(curveFeatures(collapsed).kl!.spikeSteps, [101]);
  });
  test("the healthy row takes the demo's own KL (end-window mean 0.134; 0.22 on the run issue 44 reported), not lr 5e-3's ~6", () => {
    const kl: number[] = JSON.parse(readFileSync(new URL("./fixtures/demo-kl-seed1.json", import.meta.url), "utf8")).kl;
    const demo = steps({ reward: (i, e) => 0.15 + 0.0025 * i + 0.02 * e, frac_reward_zero_std: (i) => 0.8 - 0.004 * i }, 7, kl.length).map((x, i) => ({
      step: x.step,
      metrics: { ...x.metrics, kl: kl[i] },
    }));
    assert.ok(fired(demo).includes("rises steadily | moderate | falling"), JSON.stringify(attribute(curveFeatures(demo), NO_EVAL)[0].evidence));
    const end = demo.map((x, i) => (i >= 120 ? { step: x.step, metrics: { ...x.metrics, kl: 0.22 } } : x));
    assert.ok(fired(end).includes("rises steadily | moderate | falling"));
    const drifted = demo.map((x, i) => (i >= 120 ? { step: x.step, metrics: { ...x.metrics, kl: 6 } } : x));
    assert.ok(!fired(drifted).includes("rises steadily | moderate | falling"));
  });
});

describe("thresholds shared with the sidecar's live warnings", () => {
  test("come from CURVE_THRESHOLDS, with today's values", () => {
    assert.equal(KL_SPIKE_FACTOR, CURVE_THRESHOLDS.kl_spike_factor);
    assert.equal(KL_SPIKE_MIN, CURVE_THRESHOLDS.kl_spike_min);
    assert.equal(FRAC_ZERO_STD_HIGH, CURVE_THRESHOLDS.zero_std_warn);
    assert.equal(CLIPPED_HIGH, CURVE_THRESHOLDS.clipped_ratio_warn);
    assert.deepEqual(
      { ...CURVE_THRESHOLDS },
      {
        clipped_ratio_warn: 0.9,
        zero_std_warn: 0.9,
        zero_std_warn_steps: 5,
        zero_std_rel_tol: 1e-4,
        kl_spike_factor: 5,
        kl_spike_min: 0.05,
        kl_spike_mads: 20,
        kl_spike_window: 10,
        kl_spike_every: 10,
      },
    );
    assert.ok(Object.isFrozen(CURVE_THRESHOLDS));
  });
});

describe("constant answers: the base and the adapter judged separately", () => {
  const dist = (variant: string, labels: string[]): AnswerDistribution => {
    const set = labelSetOf(TYPOLOGIES.map((t) => ({ label: t.label, answers: t.answers })))!;
    return answerDistribution(
      variant,
      labels.map((l, i) => ({ taskId: `t${i}`, gold: TYPOLOGIES[i % 8].label, completions: [`<answer>${l}</answer>`] })),
      set,
    );
  };
  const constant = (v: string) => dist(v, Array(264).fill("money_mule"));
  const mixed = (v: string) =>
    dist(
      v,
      Array.from({ length: 264 }, (_, i) => TYPOLOGIES[(i * 3) % 8].label),
    );
  const firedCauses = (a: AnswerSignal) =>
    attribute(curveFeatures(healthy), NO_EVAL, a)
      .filter((r) => r.fired)
      .map((r) => r.row.likelyCause.split(":")[0]);

  test("a base that answers one label fires the base row, not the adapter's", () => {
    assert.deepEqual(firedCauses({ base: constant("base"), adapter: mixed("adapter") }), ["healthy", "constant answer (base)"]);
  });
  test("a mixed base and a mixed adapter fire neither row", () => {
    assert.deepEqual(firedCauses({ base: mixed("base"), adapter: mixed("adapter") }), ["healthy"]);
  });
  test("an adapter that swapped one constant answer for another is never healthy", () => {
    const swapped = dist("adapter", Array(264).fill("shell_company"));
    const results = attribute(curveFeatures(healthy), NO_EVAL, { base: constant("base"), adapter: swapped });
    assert.deepEqual(
      results.filter((r) => r.fired).map((r) => r.row.likelyCause.split(":")[0]),
      ["constant answer (base)", "constant answer (adapter)"],
    );
    const h = results.find((r) => r.row.likelyCause === "healthy")!;
    assert.match(h.evidence, /no: adapter answers shell_company on 264\/264 tasks \(100%\): a constant answer/);
  });
  test("without answers (an open-answer task set) the rows stay quiet and say why", () => {
    const r = attribute(curveFeatures(healthy), NO_EVAL).filter((x) => x.row.likelyCause.startsWith("constant answer"));
    assert.equal(r.length, 2);
    for (const x of r) {
      assert.equal(x.fired, false);
      assert.match(x.evidence, /no: no (base|adapter) answers/);
    }
  });
});

describe("zero reward variance up to float noise counts as zero-std", () => {
  test("a constant 0.2 reward with reward_std 1.5e-8 reads as frac_reward_zero_std ~1, not TRL's 0.0", () => {
    const zeroSignal = steps({ reward: () => 0.2, reward_std: () => 1.5e-8, frac_reward_zero_std: () => 0, kl: () => 0 });
    const f = curveFeatures(zeroSignal);
    assert.equal(f.fracZeroStd!.mean, 1);
    assert.ok(fired(zeroSignal).includes("flat from step 0 | ~0 | ~1"), fired(zeroSignal).join("; "));
    assert.ok(!fired(zeroSignal).includes("flat from step 0 | ~0 | low"));
  });
  test("real spread keeps TRL's value", () => {
    const live = steps({ reward: () => 0.2, reward_std: () => 0.1, frac_reward_zero_std: () => 0.25, kl: () => 0 });
    assert.equal(curveFeatures(live).fracZeroStd!.mean, 0.25);
  });
});

describe("no ratio of a change indistinguishable from 0 (issue 21)", () => {
  test("a trendless curve prints no 'x% of the change reached by mid-run'; a clear rise does", () => {
    // trendless noise around 0.3: the start-vs-end change is ~0 and its CI includes 0
    const flat = steps({ reward: (_i, e) => 0.3 + 0.1 * e, kl: () => 0.01 }, 5, 40);
    const f = curveFeatures(flat);
    assert.ok(f.reward!.changeCi.lower <= 0 && f.reward!.changeCi.upper >= 0, JSON.stringify(f.reward!.changeCi));
    assert.equal(f.reward!.midShare, null);
    assert.doesNotMatch(describeFeatures(f)[0], /of the change reached by mid-run/);
    const rise = curveFeatures(healthy);
    assert.ok(rise.reward!.midShare !== null);
    assert.match(describeFeatures(rise)[0], /\d+% of the change reached by mid-run/);
  });
});
