/**
 * Run comparison, the logic of `agent compare <run_id> <run_id>...` (commands/compare.ts parses
 * its flags): the adapters of several runs and the base model on the
 * same test tasks, judged pairwise. By default one Evaluate scores the base and every run's
 * adapter (one model load, the same decoding for all); `--from-evals` takes each run's eval.json
 * instead, and then a pair whose fingerprints differ on a field that gates (another
 * max_new_tokens, task set, model, dtype...) is refused naming the field.
 *
 * Every pair (base vs each run, and each run vs each other) gets the paired difference of the
 * primary grader's per-task scores with its decision interval and governing test
 * (core/base-vs-adapter.ts compareScores: Tango + exact McNemar for 0/1 scores, the paired t for
 * per-task means), and Holm's step-down adjustment across the comparisons made (stats.holmAdjust):
 * a pair "differs" only when its Holm-adjusted p < 0.05. Written to
 * agent-evals/compare/<id>/compare.md (a table and compare.png, drawn by `py-trainer plot compare`)
 * and compare.json, each atomically.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";

import type { EvaluateResult } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import type { SidecarClient } from "../../sidecar/client.js";
import { codeRevision } from "../code-revision.js";
import { ADAPTER_VARIANT, DECISION_ALPHA, compareScores, type Comparison } from "../core/base-vs-adapter.js";
import { EVAL_FILE, readEvalLog, type EvalLog, type EvalSettings } from "../core/eval-log.js";
import { holmAdjust } from "../core/stats/index.js";
import { buildEvalLog } from "../eval/build-eval-log.js";
import { checkSettings, evaluateRequest, progressPrinter, runEvaluate } from "../eval/evaluate.js";
import { compareFingerprints, fingerprintGates, fingerprintWarnings } from "../eval/fingerprint.js";
import { scoresOf } from "../eval/grading.js";
import type { TaskSet } from "../eval/task-set.js";
import { table } from "../report/markdown.js";
import { pp } from "../verdict/milestone.js";
import { UserError, pyTrainerBin, runDir, writeFileAtomic } from "../workspace.js";

export const COMPARE_FILE = "compare.md";
export const COMPARE_PNG = "compare.png";

/** One run as compared: its id and its eval log (base + its adapter, with the fingerprint). */
export interface ComparedRun {
  runId: string;
  log: EvalLog;
}

/** One pairwise comparison: `b - a` on the primary grader's per-task scores. */
export interface PairRow {
  a: string;
  b: string;
  comparison: Comparison;
  /** the governing test's p (null: undefined, no variance) */
  p: number | null;
  /** Holm-adjusted across the comparisons with a defined p; null with p */
  holm: number | null;
  /** Holm-adjusted p < DECISION_ALPHA */
  differs: boolean;
}

export interface CompareResult {
  runs: ComparedRun[];
  pairs: PairRow[];
  /** fingerprint fields that differ but only warn (batch size, library versions), per run */
  warnings: string[];
}

/** A run's variant by name ("base" or its adapter), as per-task scores. */
function scores(log: EvalLog, name: string): Map<string, number> {
  const v = log.variants.find((x) => x.name === name);
  if (!v) throw new UserError(`agent compare: run ${log.runId}'s eval has no ${name} variant`);
  return scoresOf(v.perTask);
}

/** Refuse runs whose fingerprints differ on a gating field, naming the field (pure). */
export function checkComparable(runs: ReadonlyArray<ComparedRun>): string[] {
  const first = runs[0];
  const warnings: string[] = [];
  for (const r of runs) {
    if (!r.log.fingerprint)
      throw new UserError(`agent compare: run ${r.runId}'s eval.json has no fingerprint (an older agent wrote it); rerun agent eval ${r.runId}`);
  }
  for (const r of runs.slice(1)) {
    const rows = compareFingerprints(first.log.fingerprint!, r.log.fingerprint!);
    const gates = fingerprintGates(rows);
    if (gates.length) {
      throw new UserError(
        `agent compare: ${first.runId} vs ${r.runId}: not comparable, their evals' fingerprints differ: ${gates.join("; ")} (${first.runId} first)`,
      );
    }
    for (const w of fingerprintWarnings(rows)) warnings.push(`${first.runId} vs ${r.runId}: ${w}`);
  }
  return warnings;
}

/** Every pair (base vs each run, then each run vs each later one) with Holm across them (pure). */
export function comparePairs(runs: ReadonlyArray<ComparedRun>): CompareResult {
  if (runs.length < 1) throw new UserError("agent compare: which runs? give at least two run ids");
  const warnings = checkComparable(runs);
  const raw: Array<Omit<PairRow, "holm" | "differs">> = [];
  for (const r of runs) {
    const c = compareScores(scores(r.log, "base"), scores(r.log, ADAPTER_VARIANT), { base: "base", candidate: r.runId });
    raw.push({ a: "base", b: r.runId, comparison: c, p: c.decision?.p ?? null });
  }
  for (let i = 0; i < runs.length; i++) {
    for (let j = i + 1; j < runs.length; j++) {
      const [x, y] = [runs[i], runs[j]];
      const c = compareScores(scores(x.log, ADAPTER_VARIANT), scores(y.log, ADAPTER_VARIANT), { base: x.runId, candidate: y.runId });
      raw.push({ a: x.runId, b: y.runId, comparison: c, p: c.decision?.p ?? null });
    }
  }
  const defined = raw.map((r, i) => [r.p, i] as const).filter((x): x is readonly [number, number] => x[0] !== null);
  const adjusted = defined.length ? holmAdjust(defined.map(([p]) => p)) : [];
  const holmOf = new Map(defined.map(([, i], k) => [i, adjusted[k]]));
  const pairs = raw.map((r, i) => {
    const holm = holmOf.get(i) ?? null;
    return { ...r, holm, differs: holm !== null && holm < DECISION_ALPHA };
  });
  return { runs: [...runs], pairs, warnings };
}

// ---------------------------------------------------------------------------------------------
// The runs' eval logs: their eval.json files, or one Evaluate for every run

/** A run's eval records: eval.json and any partial eval-limit-<n>.json beside it. */
function evalRecords(evalsDir: string, runId: string): string[] {
  const dir = runDir(evalsDir, runId);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f === EVAL_FILE || /^eval-limit-\d+\.json$/.test(f))
    .map((f) => join(dir, f));
}

/**
 * Each run's eval log (`--from-evals`): its eval.json, or, where the runs' eval.json files cover
 * different numbers of tasks, the largest record every run has for the same number (a run evaluated
 * in full keeps its partial `--limit` evals apart in eval-limit-<n>.json). A run without any
 * record is refused naming the command.
 */
export function readComparedRuns(evalsDir: string, runIds: ReadonlyArray<string>): ComparedRun[] {
  const logs = runIds.map((runId) => {
    const paths = evalRecords(evalsDir, runId);
    if (!paths.some((p) => p.endsWith(`/${EVAL_FILE}`))) {
      throw new UserError(`agent compare: run ${runId} has no eval.json (evaluate it with: agent eval ${runId}, or drop --from-evals)`);
    }
    return paths.map((p) => ({ path: p, log: readEvalLog(p) }));
  });
  const key = (l: EvalLog) => `${l.taskSet.split}/${l.taskSet.n}`;
  const main = logs.map((records) => records.find((r) => r.path.endsWith(`/${EVAL_FILE}`))!.log);
  if (new Set(main.map(key)).size > 1) {
    const shared = [...new Set(logs[0].map((r) => key(r.log)))]
      .filter((k) => logs.every((records) => records.some((r) => key(r.log) === k)))
      .sort((a, b) => Number(b.split("/")[1]) - Number(a.split("/")[1]));
    if (shared.length) return runIds.map((runId, i) => ({ runId, log: logs[i].find((r) => key(r.log) === shared[0])!.log }));
  }
  return runIds.map((runId, i) => ({ runId, log: main[i] }));
}

/** The base and every run's adapter in ONE Evaluate; each run's part as its own eval log. */
export async function evaluateTogether(client: SidecarClient, runIds: string[], settings: EvalSettings, taskSet: TaskSet): Promise<ComparedRun[]> {
  checkSettings(settings, taskSet);
  const request = evaluateRequest(
    settings,
    taskSet,
    runIds.map((id) => ({ name: id, runId: id })),
  );
  const result = await runEvaluate(client, request, progressPrinter("compare"), taskSet.agent);
  return runIds.map((id) => ({ runId: id, log: buildEvalLog(id, settings, taskSet, partFor(result, id)) }));
}

/** The result as if only `id`'s adapter had been evaluated (its variant named "adapter"). */
function partFor(result: EvaluateResult, id: string): EvaluateResult {
  const rename = <T extends { name: string }>(x: T): T => ({ ...x, name: ADAPTER_VARIANT });
  return {
    ...result,
    variants: result.variants.filter((v) => v.name === "base" || v.name === id).map((v) => (v.name === id ? rename(v) : v)),
    adapters: result.adapters.filter((a) => a.name === id).map(rename),
  };
}

// ---------------------------------------------------------------------------------------------
// compare.md

const p3 = (p: number | null) => (p === null ? "undefined (no variance)" : p < 0.001 ? p.toExponential(1) : p.toFixed(3));

/** One pair as `agent compare` prints it. */
export function pairLine(r: PairRow): string {
  const d = r.comparison.decision;
  return `${r.b} - ${r.a}: ${r.comparison.paired ? pp(r.comparison.paired.meanDiff) : "-"}${d ? ` (95% CI ${pp(d.lower)} to ${pp(d.upper)}, ${d.test} p=${p3(r.p)}, Holm ${r.holm === null ? "-" : p3(r.holm)})` : ""}${r.differs ? " DIFFERS" : ""}`;
}

/** compare.md (pure). */
export function renderCompare(id: string, res: CompareResult, opts: { plotted: string; date: Date }): string {
  const log0 = res.runs[0].log;
  const fp = log0.fingerprint!;
  const m = res.pairs.length;
  const out = [`# Compare ${id}`, ""];
  out.push(
    `${opts.date.toISOString()}: ${res.runs.map((r) => r.runId).join(", ")} and the base model on ${fp.taskSet.n} ${fp.taskSet.split} tasks of ${log0.taskSet.path} ` +
      `(primary grader ${fp.grader}; ${fp.decoding.temperature === 0 ? "greedy" : `temperature ${fp.decoding.temperature}`}, max_new_tokens ${fp.decoding.maxNewTokens}, K = ${fp.decoding.samplesPerTask}).`,
    "",
  );
  const base = log0.model.requested || "the embedded default model";
  out.push(`Base model: ${base}${log0.model.resolved ? ` (loaded as ${log0.model.resolved})` : ""}. Task file: ${log0.taskSet.path}.`, "");
  out.push(
    `Every eval's fingerprint agrees with ${res.runs[0].runId}'s on every field that gates (task set, grader, model, prompt format, decoding, device, dtype).`,
  );
  for (const w of res.warnings) out.push(`- warns only: ${w}`);
  out.push("", "## Accuracy", "");
  const acc = (name: string, log: EvalLog) => {
    const a = log.variants.find((v) => v.name === name)?.accuracy;
    return a ? `${(a.estimate * 100).toFixed(1)}% (95% CI ${(a.lower * 100).toFixed(1)}-${(a.upper * 100).toFixed(1)}%)` : "-";
  };
  out.push(
    table(
      ["variant", "adapter step", "exact match", "tasks"],
      [
        ["base", "-", acc("base", log0), String(log0.variants.find((v) => v.name === "base")?.accuracy?.n ?? 0)],
        ...res.runs.map((r) => [
          r.runId,
          r.log.adapter?.step === null || r.log.adapter?.step === undefined ? "-" : String(r.log.adapter.step),
          acc(ADAPTER_VARIANT, r.log),
          String(r.log.variants.find((v) => v.name === ADAPTER_VARIANT)?.accuracy?.n ?? 0),
        ]),
      ],
    ),
  );
  out.push("", "## Pairwise differences", "");
  out.push(
    `Each row is B - A on the same tasks, paired by task id, in percentage points, with its decision interval and the test that governs "excludes 0". ` +
      `Holm's step-down adjustment runs across the ${res.pairs.filter((p) => p.p !== null).length} comparison(s) with a defined p of the ${m} made; a pair differs only when its Holm-adjusted p < ${DECISION_ALPHA}.`,
    "",
  );
  out.push(
    table(
      ["A", "B", "n", "B - A", "95% decision interval", "governing test", "p", "Holm-adjusted p", "verdict"],
      res.pairs.map((r) => {
        const c = r.comparison;
        const d = c.decision;
        return [
          r.a,
          r.b,
          String(c.n),
          c.paired ? pp(c.paired.meanDiff) : "-",
          d ? `${pp(d.lower)} to ${pp(d.upper)} (${d.method})` : "-",
          d?.test ?? "-",
          p3(r.p),
          r.holm === null ? "-" : p3(r.holm),
          r.differs ? (c.paired!.meanDiff > 0 ? "B better" : "A better") : "not distinguishable",
        ];
      }),
    ),
  );
  out.push("");
  if (opts.plotted) out.push(`_${COMPARE_PNG} not drawn: ${opts.plotted}. The table holds the same numbers._`);
  else out.push(`![pairwise differences with their decision intervals](${COMPARE_PNG})`);
  out.push(
    "",
    "Filled points: the Holm-adjusted test rejects 0; hollow: it does not. Each interval is that pair's own 95% interval, not adjusted for the other comparisons: an interval that excludes 0 with a Holm-adjusted p >= 0.05 is a difference this table does not claim.",
    "",
  );
  return out.join("\n");
}

/** compare.png through `py-trainer plot compare`; "" when drawn, else why not. */
function drawPlot(dir: string, id: string, res: CompareResult): string {
  const rows = res.pairs
    .filter((r) => r.comparison.decision)
    .map((r) => ({
      label: `${r.b} - ${r.a}`,
      estimate: r.comparison.paired!.meanDiff,
      lower: r.comparison.decision!.lower,
      upper: r.comparison.decision!.upper,
      rejects: r.differs,
    }));
  if (!rows.length) return "no comparison has an interval";
  const spec = join(dir, "compare-plot.json");
  writeFileAtomic(spec, JSON.stringify({ title: `${id}: pairwise differences (Holm across ${res.pairs.length})`, rows }) + "\n");
  const bin = pyTrainerBin();
  if (!existsSync(bin)) return `py-trainer not found at ${bin} (set PY_TRAINER_BIN)`;
  const r = spawnSync(bin, ["plot", "compare", spec, join(dir, COMPARE_PNG)], { encoding: "utf8", timeout: 120_000 });
  return r.status === 0 ? "" : `py-trainer plot compare failed (${r.error?.message ?? `exit ${r.status}`}: ${(r.stderr ?? "").trim().split("\n").pop() ?? ""})`;
}

/** Write compare/<id>/compare.md, compare.json and compare.png; returns the folder. */
export function writeCompare(evalsDir: string, id: string, res: CompareResult, date = new Date()): string {
  const dir = join(evalsDir, "compare", id);
  mkdirSync(dir, { recursive: true });
  const plotted = drawPlot(dir, id, res);
  const json = {
    schema: "agent-compare/v1",
    id,
    date: date.toISOString(),
    codeRevision: codeRevision(),
    runs: res.runs.map((r) => ({ runId: r.runId, adapter: r.log.adapter ?? null, fingerprint: r.log.fingerprint })),
    pairs: res.pairs.map((r) => ({
      a: r.a,
      b: r.b,
      n: r.comparison.n,
      meanDiff: r.comparison.paired?.meanDiff ?? null,
      decision: r.comparison.decision,
      p: r.p,
      holm: r.holm,
      differs: r.differs,
    })),
    warnings: res.warnings,
  };
  writeFileAtomic(join(dir, "compare.json"), JSON.stringify(json, null, 2) + "\n");
  writeFileAtomic(join(dir, COMPARE_FILE), renderCompare(id, res, { plotted, date }));
  return dir;
}
