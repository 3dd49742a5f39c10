import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import { graderAgreement, humanAgreement } from "../src/agent/eval/grader-agreement.js";
import { DEFAULT_EVAL_SETTINGS, modelIdentity } from "../src/agent/eval/evaluate.js";
import { RegradeMismatchError, accuracy, perTaskScores, regrade } from "../src/agent/eval/grading.js";
import { loadTaskSet, type TaskSet } from "../src/agent/eval/task-set.js";
import { compareScores } from "../src/agent/core/base-vs-adapter.js";
import { buildEvalLog } from "../src/agent/eval/build-eval-log.js";
import { cohenKappa, minimumDetectableEffect, pairedComparison, requiredNForDelta } from "../src/agent/core/stats/index.js";
import { gradedResult, row } from "./helpers/eval-fixtures.js";

const GRADERS = DEFAULT_EVAL_SETTINGS.graders;

const rows = [row("t1", "structuring"), row("t2", "smurfing"), row("t3", "layering"), row("t4", "money_mule", ["money_mule", "mule"])];
const completions = {
  base: { t1: ["<answer>smurfing</answer>"], t2: ["<answer>smurfing</answer>"], t3: ["layering"], t4: ["<answer>shell_company</answer>"] },
  adapter: {
    t1: ["<answer>structuring</answer>"],
    t2: ["<answer>smurfing</answer>"],
    t3: ["<answer>layering</answer>"],
    t4: ["<answer>shell_company</answer>"],
  },
};

describe("re-grading", () => {
  test("a sidecar that grades like task-rewards.ts passes, every score compared", () => {
    const result = gradedResult(rows, completions);
    assert.equal(regrade(result.variants, rows, GRADERS), 2 * 4 * 1 * 3);
  });

  test("a deliberately corrupted score is caught and reported with variant, task, grader, both scores and the completion", () => {
    const result = gradedResult(rows, completions);
    result.variants[1].tasks[2].samples[0].scores["exact_match"] = 0; // TS says 1
    assert.throws(
      () => regrade(result.variants, rows, GRADERS),
      (err: unknown) => {
        assert.ok(err instanceof RegradeMismatchError);
        assert.equal(err.mismatches.length, 1);
        assert.deepEqual(
          { ...err.mismatches[0] },
          { variant: "adapter", taskId: "t3", sample: 0, grader: "exact_match", python: 0, ts: 1, completion: "<answer>layering</answer>" },
        );
        assert.match(err.message, /disagrees with the sidecar on 1 of 24 scores/);
        assert.match(err.message, /adapter \/ t3 \/ sample 0 \/ exact_match: python 0, ts 1, completion "<answer>layering<\/answer>"/);
        return true;
      },
    );
  });

  test("NaN (unscorable) equals NaN, but NaN against a number, or a missing grader, is a mismatch", () => {
    const blank = [row("b1", "structuring", ["   "])]; // no usable gold: exact_match is unscorable
    const result = gradedResult(blank, { base: { b1: ["<answer>structuring</answer>"] } });
    assert.ok(Number.isNaN(result.variants[0].tasks[0].samples[0].scores["exact_match"]));
    assert.equal(regrade(result.variants, blank, GRADERS), 3);
    result.variants[0].tasks[0].samples[0].scores["exact_match"] = 0;
    assert.throws(() => regrade(result.variants, blank, GRADERS), RegradeMismatchError);
    delete result.variants[0].tasks[0].samples[0].scores["exact_match"];
    assert.throws(
      () => regrade(result.variants, blank, GRADERS),
      (err: unknown) => err instanceof RegradeMismatchError && err.mismatches[0].python === undefined,
    );
  });

  test("a task missing from a variant, or one that was never asked for, is an error", () => {
    const result = gradedResult(rows, completions);
    result.variants[0].tasks.pop();
    assert.throws(() => regrade(result.variants, rows, GRADERS), /variant base: 1 task\(s\) without results, e.g\. t4/);
    assert.throws(() => regrade(gradedResult(rows, completions).variants, rows.slice(0, 3), GRADERS), /task "t4" was not in the request/);
  });

  test("buildEvalLog refuses a corrupted result", () => {
    const result = gradedResult(rows, completions);
    result.variants[0].tasks[0].samples[0].scores["format"] = 0.5;
    const ts: TaskSet = { path: "x.jsonl", sha256: "00", split: "test", limit: 0, rows, humanLabels: new Map() };
    assert.throws(() => buildEvalLog("r1", { ...DEFAULT_EVAL_SETTINGS }, ts, result), RegradeMismatchError);
  });
});

describe("scores, comparison and agreement", () => {
  test("per-task scores average the samples; accuracy is a Wilson interval for 0/1 scores", () => {
    const result = gradedResult(rows, completions);
    assert.deepEqual([...perTaskScores(result.variants[0]).values()], [0, 1, 0, 0]);
    assert.deepEqual([...perTaskScores(result.variants[1]).values()], [1, 1, 1, 0]);
    const acc = accuracy([1, 1, 1, 0])!;
    assert.equal(acc.method, "wilson");
    assert.equal(acc.estimate, 0.75);
    assert.ok(acc.lower < 0.75 && acc.upper > 0.75);
    assert.equal(accuracy([0.5, 1, 0])!.method, "t");
    assert.equal(accuracy([NaN]), null);
  });

  test("compareScores pairs by id, drops unscorable pairs, and uses stats.ts for every number", () => {
    const base = new Map([
      ["a", 0],
      ["b", 1],
      ["c", 0],
      ["d", 0],
      ["e", NaN],
      ["f", 1],
    ]);
    const cand = new Map([
      ["a", 1],
      ["b", 1],
      ["c", 1],
      ["d", 0],
      ["e", 1],
      ["f", 0],
      ["g", 1],
    ]);
    const c = compareScores(base, cand);
    assert.equal(c.n, 5);
    assert.equal(c.unpaired, 2); // e (base NaN), g (no base)
    assert.deepEqual(c.taskIds, ["a", "b", "c", "d", "f"]);
    const a = [0, 1, 0, 0, 1];
    const b = [1, 1, 1, 0, 0];
    const p = pairedComparison(a, b);
    assert.deepEqual(c.paired, p);
    assert.equal(c.paired!.meanDiff, 0.2);
    assert.deepEqual(c.paired!.discordant, { b: 1, c: 2 });
    assert.equal(c.requiredN, requiredNForDelta(0.2, p.sdDiff));
    assert.equal(c.mde, minimumDetectableEffect(5, p.sdDiff));
    assert.equal(c.bootstrap!.resamples, 10_000);
    assert.equal(c.bootstrap!.estimate, 0.2);
  });

  test("no difference: required n is undefined and says why; one pair: nothing is computed", () => {
    const same = compareScores(
      new Map([
        ["a", 1],
        ["b", 0],
      ]),
      new Map([
        ["a", 1],
        ["b", 0],
      ]),
    );
    assert.equal(same.requiredN, null);
    assert.match(same.requiredNNote, /observed difference is 0/);
    const one = compareScores(new Map([["a", 1]]), new Map([["a", 0]]));
    assert.equal(one.paired, null);
    assert.match(one.requiredNNote, /n=1 pairs/);
  });

  test("Cohen's kappa between the strict and the lenient grader comes from stats.cohenKappa", () => {
    const result = gradedResult(rows, completions);
    const base = result.variants[0];
    // base: strict [0,1,0,0]; lenient (answer anywhere) [0,1,1,0]: "layering" untagged counts for lenient only
    const k = graderAgreement(base)!;
    assert.equal(k.n, 4);
    assert.equal(k.observedAgreement, 0.75);
    assert.equal(k.kappa, cohenKappa([0, 1, 0, 0], [0, 1, 1, 0]).kappa);
    // adapter: both graders say 1,1,1,0: full agreement
    assert.equal(graderAgreement(result.variants[1])!.kappa, 1);
  });

  test("human labels: gold vs human per task, and the strict grader against gold vs against the human label", () => {
    const result = gradedResult(rows, completions);
    const human = new Map([
      ["t1", "structuring"],
      ["t2", "structuring"],
      ["t3", "layering"],
    ]);
    const [gold, base, adapter] = humanAgreement(result.variants, rows, human);
    assert.equal(gold.n, 3);
    assert.equal(gold.observedAgreement, 2 / 3);
    assert.equal(gold.kappa, cohenKappa(["structuring", "smurfing", "layering"], ["structuring", "structuring", "layering"]).kappa);
    // base on t1..t3: vs gold [0,1,0], vs human [0,0,0]
    assert.equal(base.n, 3);
    assert.equal(base.observedAgreement, 2 / 3);
    // adapter on t1..t3: vs gold [1,1,1], vs human [1,0,1]
    assert.equal(adapter.observedAgreement, 2 / 3);
    assert.deepEqual(humanAgreement(result.variants, rows, new Map()), []);
  });
});

describe("task sets and model identity", () => {
  test("loadTaskSet hashes the file, takes the split and limit, and reads optional human labels", () => {
    const dir = mkdtempSync(join(tmpdir(), "taskset-"));
    const path = join(dir, "tasks.jsonl");
    const all = [row("x1", "structuring"), { ...row("x2", "smurfing"), split: "train" as const }, row("x3", "layering"), row("x4", "shell_company")];
    const lines = all.map((r) => JSON.stringify(r));
    lines[2] = lines[2].replace(/}$/, ',"human_label":"layering"}');
    writeFileSync(path, lines.join("\n") + "\n");
    const ts = loadTaskSet(path, "test", 2);
    assert.deepEqual(
      ts.rows.map((r) => r.id),
      ["x1", "x3"],
    );
    assert.match(ts.sha256, /^[0-9a-f]{64}$/);
    assert.deepEqual([...ts.humanLabels], [["x3", "layering"]]);
    assert.equal(ts.path, path); // outside the repo: absolute
  });

  test("model identity is a local folder's name (content-hashed for the embedded model) or the hub id", () => {
    assert.equal(modelIdentity("/a/b/.cache/py-trainer/models/tiny-aml-qwen2-s0-8ae0970906"), "tiny-aml-qwen2-s0-8ae0970906");
    assert.equal(modelIdentity("Qwen/Qwen2.5-0.5B"), "Qwen/Qwen2.5-0.5B");
  });
});

describe("held-out templates, per typology, clustered SE, pass@k (issue 10)", async () => {
  const h = {
    ...(await import("../src/agent/eval/task-set.js")),
    ...(await import("../src/agent/eval/evaluate.js")),
    ...(await import("../src/agent/core/eval-log.js")),
    ...(await import("../src/agent/eval/build-eval-log.js")),
    ...(await import("../src/agent/core/base-vs-adapter.js")),
    ...(await import("../src/agent/eval/grading.js")),
    ...(await import("../src/agent/verdict/verdict.js")),
  };
  const { defaultTasksPath } = await import("../src/agent/eval/tasks.js");

  test("the checked-in task set's test split has a held-out-template companion with new templates", () => {
    const ts = loadTaskSet(defaultTasksPath(), "test");
    const held = h.heldOutTemplateSetFor(ts)!;
    assert.equal(held.split, "test_heldout_template");
    assert.equal(held.rows.length, 240);
    const seen = new Set(ts.rows.map((r) => r.template));
    assert.ok(held.rows.every((r) => !seen.has(r.template)));
    assert.equal(h.heldOutTemplateSetFor({ ...ts, split: "train" }), null);
    assert.equal(h.heldOutTemplateSetFor(loadTaskSet(defaultTasksPath(), "test", 12))!.rows.length, 12);
  });

  test("one Evaluate result split in two: each split re-graded and compared on its own tasks", () => {
    const r2 = [row("h1", "structuring"), row("h2", "smurfing")].map((r) => ({
      ...r,
      split: "test_heldout_template" as const,
      template: `${r.slice}/heldout-1`,
    }));
    const both = gradedResult([...rows, ...r2], {
      base: { ...completions.base, h1: ["<answer>structuring</answer>"], h2: ["<answer>layering</answer>"] },
      adapter: { ...completions.adapter, h1: ["<answer>smurfing</answer>"], h2: ["<answer>layering</answer>"] },
    });
    const held = h.restrictResult(both, new Set(["h1", "h2"]));
    assert.deepEqual(
      held.variants.map((v) => v.tasks.map((t) => t.taskId)),
      [
        ["h1", "h2"],
        ["h1", "h2"],
      ],
    );
    const taskSet: TaskSet = { path: "x.jsonl", sha256: "0".repeat(64), split: "test_heldout_template", limit: 0, rows: r2, humanLabels: new Map() };
    const sr = { ...h.splitResult(DEFAULT_EVAL_SETTINGS, taskSet, held), ...h.compareSplit(h.splitResult(DEFAULT_EVAL_SETTINGS, taskSet, held), r2) };
    assert.equal(sr.comparison!.n, 2);
    assert.equal(sr.comparison!.paired!.meanDiff, -0.5);
    assert.equal(sr.regradedScores, 2 * 2 * GRADERS.length);
  });

  test("per typology: the governing test's p, Holm-adjusted across typologies", () => {
    const base = new Map<string, number>();
    const cand = new Map<string, number>();
    const rs: Array<{ id: string; slice: string }> = [];
    for (let i = 0; i < 40; i++) {
      const t = i < 20 ? "structuring" : "smurfing";
      rs.push({ id: `k${i}`, slice: t });
      base.set(`k${i}`, 0);
      cand.set(`k${i}`, t === "structuring" && i < 12 ? 1 : 0); // 12 wins of 20 on structuring
    }
    const out = h.sliceBreakdown(base, cand, rs);
    assert.deepEqual(
      out.map((t) => t.slice),
      ["smurfing", "structuring"],
    );
    const s = out.find((t) => t.slice === "structuring")!;
    assert.equal(s.test, "exact McNemar test");
    assert.ok(Math.abs(s.p! - 2 ** -11) < 1e-15); // 12 vs 0 discordant
    assert.equal(s.pHolm, Math.min(1, 2 * s.p!));
    assert.equal(out.find((t) => t.slice === "smurfing")!.p, 1);
  });

  test("template-clustered SE as a sensitivity row", () => {
    const base = new Map([...Array(12).keys()].map((i) => [`q${i}`, 0]));
    const cand = new Map([...Array(12).keys()].map((i) => [`q${i}`, i < 6 ? 1 : 0]));
    const templates = new Map([...Array(12).keys()].map((i) => [`q${i}`, `T${Math.floor(i / 3)}`]));
    const c = compareScores(base, cand, undefined, templates);
    assert.equal(c.clustered!.clusters, 4);
    assert.ok(c.clustered!.se > c.clustered!.iidSe); // wins cluster in templates T0, T1
    assert.equal(compareScores(base, cand).clustered, null);
  });

  test("pass@k with K > 1 samples: k = 1 is the mean accuracy, k = K 'any correct'", () => {
    const v = {
      name: "adapter",
      tasks: [
        {
          taskId: "a",
          samples: [
            { completion: "", scores: { exact_match: 1 } },
            { completion: "", scores: { exact_match: 0 } },
            { completion: "", scores: { exact_match: 0 } },
            { completion: "", scores: { exact_match: 0 } },
          ],
        },
        {
          taskId: "b",
          samples: [
            { completion: "", scores: { exact_match: 0 } },
            { completion: "", scores: { exact_match: 0 } },
            { completion: "", scores: { exact_match: 0 } },
            { completion: "", scores: { exact_match: 0 } },
          ],
        },
      ],
    };
    assert.deepEqual(h.meanPassAtK(v), [
      { k: 1, estimate: 0.125, tasks: 2 },
      { k: 4, estimate: 0.5, tasks: 2 },
    ]);
    assert.deepEqual(h.meanPassAtK({ name: "x", tasks: [{ taskId: "a", samples: [{ completion: "", scores: { exact_match: 1 } }] }] }), []);
  });
});

test("grader kappa with K > 1 samples uses per-task means (tasks are the unit), linearly weighted", async () => {
  const { graderAgreement } = await import("../src/agent/eval/grader-agreement.js");
  const sample = (a: number, b: number) => ({ completion: "", scores: { exact_match: a, exact_match_lenient: b } });
  const v = {
    name: "adapter",
    tasks: [
      { taskId: "a", samples: [sample(1, 1), sample(0, 1)] },
      { taskId: "b", samples: [sample(0, 0), sample(0, 0)] },
      { taskId: "c", samples: [sample(1, 1), sample(1, 1)] },
      { taskId: "d", samples: [sample(0, 1), sample(0, 0)] },
    ],
  };
  const k = graderAgreement(v)!;
  assert.equal(k.n, 4); // tasks, not 8 samples
  assert.match(k.what, /per-task means of 2 samples, linear weights/);
  const ref = cohenKappa([0.5, 0, 1, 0], [1, 0, 1, 0.5], { weights: "linear", categories: [0, 0.5, 1] });
  assert.equal(k.kappa, ref.kappa);
  assert.equal(k.se, ref.se);
});
