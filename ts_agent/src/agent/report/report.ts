/**
 * agent-evals/runs/<run_id>/report.md: the first-run report.
 *
 * Reads what the agent already has on disk, nothing from the sidecar: run.json (the Run proto as
 * JSON), events.jsonl (TrainStep metrics), eval.json (`agent eval`), ../../baseline.json. Sections:
 * the reward plot; step-0 vs end held-out reward with CI; base vs adapter (paired by task id, CI,
 * McNemar, required N, MDE, grader kappa); the milestone verdict; the attribution table applied
 * to this run; PPO vs GRPO TCO; what is pending. `analyzeReport` is pure; `renderReport` turns its
 * result into Markdown; `writeReport` does the I/O.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";

import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";

import { RunEventSchema, RunSchema, RunState, TrainMode, type Run } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { matchBaseline, readBaseline, runsJudgedOn, type Baseline, type BaselineMatch } from "../eval/baseline.js";
import {
  ADAPTER_VARIANT,
  BOOTSTRAP_RESAMPLES,
  BOOTSTRAP_SEED,
  EVAL_FILE,
  compareScores,
  scoresOf,
  type Agreement,
  type Comparison,
  type EvalRecord,
} from "../eval/harness.js";
import { writeFileAtomic } from "../workspace.js";
import { bootstrapMeanCI, operatingCharacteristic, pairedBootstrapCI, requiredNForDelta, wilsonInterval, type Interval } from "../eval/stats.js";
import { attribute, nearMisses, type DownstreamSignal, type RowResult } from "./attribution.js";
import { curveFeatures, describeFeatures, type CurveFeatures, type StepMetrics } from "./curve-features.js";
import {
  DOWNSTREAM_MIN_DELTA,
  DOWNSTREAM_MIN_DELTA_PP,
  MIN_HELDOUT_PROMPTS,
  MIN_MILESTONE_TASKS,
  REWARD_MIN_RELATIVE_CHANGE,
  judgeMilestone,
  pct,
  pp,
  type DownstreamEvidence,
  type MilestoneVerdict,
  type RewardEvidence,
} from "./milestone.js";
import { POWER_CSV, POWER_SVG, powerCsv, powerCurve, powerSvg, type PowerCurve } from "./power.js";
import {
  TCO_QUALITATIVE,
  bytesPerParam,
  computeSide,
  formatBytes,
  parseStepTimeBreakdown,
  tcoMemory,
  tcoMemoryPreference,
  type ComputeSide,
  type MemoryConfig,
  type Precision,
  type StepTimeBreakdown,
  type TcoInput,
} from "./tco.js";

export const REPORT_FILE = "report.md";

// ---------------------------------------------------------------------------------------------
// Inputs

export interface RunWarningLine {
  code: string;
  message: string;
  step: number;
}

/** Everything the report reads. */
export interface ReportInput {
  runId: string;
  run: Run | null;
  steps: StepMetrics[];
  warnings: RunWarningLine[];
  evalRecord: EvalRecord | null;
  baseline: Baseline | null;
  /** files present in the run folder, relative, '/'-separated */
  files: string[];
  /** run ids whose eval.json was judged on this baseline and test split (this run included) */
  runsJudged: string[];
  now: Date;
  /** summary.json's time_breakdown (the run's measured step time by phase), when downloaded */
  timeBreakdown?: StepTimeBreakdown | null;
}

function listFiles(dir: string, root = dir): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...listFiles(p, root));
    else out.push(relative(root, p).split("\\").join("/"));
  }
  return out;
}

/** Read a run's local artifacts; missing files become nulls / empty lists. */
export function loadReportInput(evalsDir: string, runId: string, now = new Date()): ReportInput {
  const dir = join(evalsDir, "runs", runId);
  if (!existsSync(dir)) throw new Error(`${dir} does not exist (train with \`agent train\` or \`agent demo\` first)`);
  const runPath = join(dir, "run.json");
  const run = existsSync(runPath)
    ? fromJson(RunSchema, JSON.parse(readFileSync(runPath, "utf8")) as JsonValue, { ignoreUnknownFields: true })
    : null;
  const steps: StepMetrics[] = [];
  const warnings: RunWarningLine[] = [];
  const eventsPath = join(dir, "events.jsonl");
  if (existsSync(eventsPath)) {
    for (const line of readFileSync(eventsPath, "utf8").split("\n")) {
      if (line.trim() === "") continue;
      const ev = fromJson(RunEventSchema, JSON.parse(line) as JsonValue, { ignoreUnknownFields: true });
      if (ev.kind.case === "trainStep") steps.push({ step: Number(ev.kind.value.step), metrics: ev.kind.value.metrics });
      if (ev.kind.case === "warning") warnings.push({ code: ev.kind.value.code, message: ev.kind.value.message, step: Number(ev.kind.value.step) });
    }
  }
  const evalPath = join(dir, EVAL_FILE);
  const evalRecord = existsSync(evalPath) ? (JSON.parse(readFileSync(evalPath, "utf8")) as EvalRecord) : null;
  const baseline = readBaseline(evalsDir);
  const summaryPath = join(dir, "summary.json");
  const timeBreakdown = existsSync(summaryPath)
    ? parseStepTimeBreakdown((JSON.parse(readFileSync(summaryPath, "utf8")) as { time_breakdown?: unknown }).time_breakdown)
    : null;
  return { runId, run, steps, warnings, evalRecord, baseline, files: listFiles(dir), runsJudged: baseline ? runsJudgedOn(evalsDir, baseline) : [], now, timeBreakdown };
}

// ---------------------------------------------------------------------------------------------
// Analysis

export interface ReportAnalysis {
  reward: RewardEvidence | null;
  /** adapter vs the base scores the milestone uses */
  comparison: Comparison | null;
  /** where those base scores came from */
  baseSource: string;
  /** tasks where baseline.json and the eval's own base variant disagree (when both exist) */
  baseDisagreements: number | null;
  baselineMatch: BaselineMatch;
  milestone: MilestoneVerdict;
  features: CurveFeatures;
  attribution: RowResult[];
  tco: { input: TcoInput; precisionNote: string; configs: MemoryConfig[] } | null;
  /** the compute side of PPO vs GRPO, from summary.json's time_breakdown (GRPO runs) */
  compute?: ComputeSide | null;
  /** P(PASS) against the true delta for several n; null without a paired comparison with spread */
  power: PowerCurve | null;
  /** ranked-preference runs only: their own held-out metrics */
  preference: PreferenceAnalysis | null;
  pending: string[];
}

export const CI_METHOD = `paired percentile bootstrap over tasks, ${BOOTSTRAP_RESAMPLES} resamples, seed ${BOOTSTRAP_SEED}`;

/** The milestone's downstream evidence: the comparison's decision interval and governing test,
 *  and P(PASS) at a true delta equal to the threshold at this n. */
export function downstreamEvidence(c: Comparison | null, baseSource: string): DownstreamEvidence | null {
  if (!c) return null;
  const d = c.decision;
  return {
    n: c.n,
    delta: c.paired ? c.paired.meanDiff : NaN,
    ciLow: d ? d.lower : NaN,
    ciHigh: d ? d.upper : NaN,
    ciMethod: d ? d.method : CI_METHOD,
    governingTest: d?.test,
    testP: d?.p ?? null,
    testRejects: d ? d.rejects : null,
    requiredN: c.requiredN,
    mde: c.mde,
    pPassAtThreshold: c.paired ? operatingCharacteristic(DOWNSTREAM_MIN_DELTA, c.paired.sdDiff, c.n, { threshold: DOWNSTREAM_MIN_DELTA }).pPass : null,
    baseSource,
  };
}

/** Pairs for 80% power at the larger of the observed |delta| and the milestone threshold (the
 *  "required n" attribution's underpowered row compares n with); null when undefined. */
export function requiredNForVerdict(c: Comparison): number | null {
  if (!c.paired || c.paired.sdDiff === 0) return null;
  const target = Math.max(Math.abs(c.paired.meanDiff), DOWNSTREAM_MIN_DELTA);
  return requiredNForDelta(target, c.paired.sdDiff);
}

/** What attribution reads about the downstream comparison and the held-out reward. */
export function downstreamSignal(c: Comparison | null, reward: RewardEvidence | null): DownstreamSignal {
  const heldOutRose =
    reward && reward.numPrompts >= MIN_HELDOUT_PROMPTS ? Number.isFinite(reward.ciLow) && reward.ciLow > 0 : null;
  const d = c?.decision ?? null;
  if (!c || !c.paired || !d) return { heldOutRose, significant: null, text: "" };
  return {
    heldOutRose,
    significant: d.rejects && (d.lower > 0 || d.upper < 0),
    text: `${pp(c.paired.meanDiff)} (95% CI ${pp(d.lower)} to ${pp(d.upper)}, ${d.method}), n=${c.n}`,
    n: c.n,
    delta: c.paired.meanDiff,
    ciLower: d.lower,
    ciUpper: d.upper,
    requiredN: requiredNForVerdict(c),
  };
}

/** A ranked-preference run's held-out numbers (its "reward" is pairwise accuracy). */
export interface PreferenceAnalysis {
  groups: number;
  startPairwise: number;
  endPairwise: number;
  endPairwiseCi: Interval;
  /** end - start pairwise accuracy, paired percentile bootstrap over groups */
  change: number;
  changeCi: Interval | null;
  groupWinRate: number | null;
  /** percentile bootstrap over the groups' wins (ties as their expectation); Wilson (ties rounded)
   *  for a run from a sidecar that did not send the per-group values */
  groupWinRateCi: Interval | null;
  groupWinRateMethod: string;
  winMargin: number | null;
  /** percentile bootstrap over the groups' margins */
  winMarginCi: Interval | null;
  consistency: number | null;
  /** percentile bootstrap over the consistency prompts' sds */
  consistencyCi: Interval | null;
  /** TRL's DPO training metrics, first vs last logged step */
  trainCurve: Array<{ key: string; first: number; last: number; steps: number }>;
  beta: number;
}

export function isPreferenceRun(run: Run | null): boolean {
  return run?.request?.mode === TrainMode.RANKED_PREFERENCE;
}

/** The ranked-preference section's numbers, from run.json and the logged steps. */
export function preferenceAnalysis(run: Run | null, steps: ReadonlyArray<StepMetrics>): PreferenceAnalysis | null {
  if (!isPreferenceRun(run)) return null;
  const r = run!.result;
  const start = r?.startReward;
  const end = r?.endReward;
  const pm = r?.preferenceMetrics;
  const groups = end?.numPrompts ?? 0;
  let changeCi: Interval | null = null;
  if (start && end && start.perPrompt.length === end.perPrompt.length && start.perPrompt.length >= 2) {
    const a = [...start.perPrompt];
    const b = [...end.perPrompt];
    if (a.every(Number.isFinite) && b.every(Number.isFinite)) changeCi = pairedBootstrapCI(a, b, { resamples: 2000, seed: 0 });
  }
  let winCi: Interval | null = null;
  let winMethod = "";
  const unitCi = (xs: ReadonlyArray<number> | undefined): Interval | null =>
    xs && xs.length >= 2 ? bootstrapMeanCI(xs, { seed: 0, resamples: 2000 }) : null;
  if (pm && pm.perGroupWin.length >= 2) {
    winCi = unitCi(pm.perGroupWin);
    winMethod = `percentile bootstrap over ${pm.perGroupWin.length} groups, 2000 resamples, seed 0`;
  } else if (pm && groups > 0 && Number.isFinite(pm.groupWinRate)) {
    const w = wilsonInterval(Math.min(groups, Math.max(0, Math.round(pm.groupWinRate * groups))), groups);
    winCi = { lower: w.lower, upper: w.upper };
    winMethod = `Wilson over ${groups} groups, ties rounded`;
  }
  const trainCurve: PreferenceAnalysis["trainCurve"] = [];
  for (const key of ["rewards/accuracies", "rewards/margins", "loss"]) {
    const xs = steps.map((s) => s.metrics[key]).filter((x): x is number => typeof x === "number" && Number.isFinite(x));
    if (xs.length > 0) trainCurve.push({ key, first: xs[0], last: xs[xs.length - 1], steps: xs.length });
  }
  return {
    groups,
    startPairwise: start?.mean ?? NaN,
    endPairwise: end?.mean ?? NaN,
    endPairwiseCi: { lower: end?.ciLow ?? NaN, upper: end?.ciHigh ?? NaN },
    change: (end?.mean ?? NaN) - (start?.mean ?? NaN),
    changeCi,
    groupWinRate: pm ? pm.groupWinRate : null,
    groupWinRateCi: winCi,
    groupWinRateMethod: winMethod,
    winMargin: pm ? pm.winMargin : null,
    winMarginCi: unitCi(pm?.perGroupMargin),
    consistency: pm ? pm.preferenceConsistency : null,
    consistencyCi: unitCi(pm?.perPromptConsistency),
    trainCurve,
    beta: run!.request?.preference?.beta ?? 0.1,
  };
}

function rewardEvidence(run: Run | null): RewardEvidence | null {
  const r = run?.result;
  if (!r?.startReward || !r.endReward) return null;
  return {
    startMean: r.startReward.mean,
    endMean: r.endReward.mean,
    relativeChange: r.relativeChange,
    ciLow: r.relativeChangeCiLow,
    ciHigh: r.relativeChangeCiHigh,
    numPrompts: r.endReward.numPrompts,
    samplesPerPrompt: r.endReward.samplesPerPrompt,
    pPassAtThreshold: rewardPassProbability(r.relativeChangeCiLow, r.relativeChangeCiHigh, r.endReward.numPrompts),
  };
}

/** P(PASS | true relative change = +20%) from the CI's width (se = width / (2 z)), by the
 *  normal approximation; null when the CI is not finite or has no width. */
export function rewardPassProbability(lo: number, hi: number, prompts: number): number | null {
  if (!Number.isFinite(lo) || !Number.isFinite(hi) || !(hi > lo) || prompts < 1) return null;
  const se = (hi - lo) / (2 * 1.959963984540054);
  return operatingCharacteristic(REWARD_MIN_RELATIVE_CHANGE, se * Math.sqrt(prompts), prompts, { threshold: REWARD_MIN_RELATIVE_CHANGE }).pPass;
}

function tcoFor(run: Run | null): ReportAnalysis["tco"] {
  const r = run?.result;
  if (!r || r.totalParams === 0n) return null;
  const given = run?.request?.runtime?.precision ?? "";
  const precision: Precision = given === "bf16" || given === "fp16" ? given : "fp32";
  const precisionNote = given ? `${given} (from the run's request)` : "fp32 (the request left it empty: fp32 on CPU)";
  const preference = isPreferenceRun(run);
  const input: TcoInput = {
    baseParams: Number(r.totalParams),
    loraParams: Number(r.trainableParams),
    precision,
    beta: preference ? (run?.request?.preference?.beta ?? 0.1) : (run?.request?.grpo?.beta ?? 0),
  };
  return { input, precisionNote, configs: preference ? tcoMemoryPreference(input) : tcoMemory(input) };
}

export function analyzeReport(input: ReportInput): ReportAnalysis {
  const ev = input.evalRecord;
  const adapter = ev?.variants.find((v) => v.name === ADAPTER_VARIANT) ?? null;
  const evalBase = ev?.variants.find((v) => v.name === "base") ?? null;
  let baselineMatch: BaselineMatch;
  if (ev && adapter) {
    baselineMatch = matchBaseline(input.baseline, { model: ev.model, taskSet: ev.taskSet, settings: ev.settings, taskIds: Object.keys(adapter.perTask) });
  } else if (!input.baseline) {
    baselineMatch = { status: "missing" };
  } else {
    const runModel = input.run?.request?.baseModel ?? "";
    baselineMatch =
      input.baseline.model.requested === runModel
        ? { status: "match" }
        : { status: "mismatch", reasons: [`model: baseline ${JSON.stringify(input.baseline.model.requested)}, run ${JSON.stringify(runModel)}`] };
  }
  let comparison: Comparison | null = null;
  let baseSource = "";
  let baseDisagreements: number | null = null;
  if (adapter) {
    const cand = scoresOf(adapter.perTask);
    if (baselineMatch.status === "match" && input.baseline) {
      baseSource = "baseline.json";
      comparison = compareScores(scoresOf(input.baseline.perTask), cand, { base: "baseline.json", candidate: ADAPTER_VARIANT });
    } else if (evalBase) {
      baseSource = "the eval's own base variant (baseline.json not usable)";
      comparison = compareScores(scoresOf(evalBase.perTask), cand, { base: "base (this eval)", candidate: ADAPTER_VARIANT });
    }
    if (input.baseline && evalBase) {
      baseDisagreements = 0;
      for (const [id, x] of Object.entries(evalBase.perTask)) {
        if (Object.prototype.hasOwnProperty.call(input.baseline.perTask, id) && input.baseline.perTask[id] !== x) baseDisagreements++;
      }
    }
  }
  const preference = preferenceAnalysis(input.run, input.steps);
  // A ranked-preference run's held-out "reward" is pairwise accuracy, 0.5 by construction at step 0:
  // the +20% relative criterion does not apply to it (its own section reports it instead).
  const reward = preference ? null : rewardEvidence(input.run);
  const milestone = judgeMilestone({
    reward,
    rewardNotApplicable: preference
      ? "a ranked-preference run's held-out reward is pairwise accuracy, 0.5 by construction at step 0 (see the ranked-preference section)"
      : undefined,
    downstream: downstreamEvidence(comparison, baseSource),
    baseline: baselineMatch,
  });
  const features = curveFeatures(input.steps);
  const attribution = attribute(features, downstreamSignal(comparison, reward));
  const tco = tcoFor(input.run);

  const pending: string[] = [];
  const run = input.run;
  if (!run) pending.push("run.json is missing: the run was not followed to its end by `agent train` / `agent demo`.");
  else if (run.state !== RunState.SUCCEEDED) pending.push(`the run is ${RunState[run.state]}${run.reason ? ` (${run.reason})` : ""}, not SUCCEEDED.`);
  if (!reward) pending.push("held-out start/end reward: not in run.json.");
  if (!input.files.includes("reward-vs-step.png")) pending.push("reward-vs-step.png was not downloaded.");
  if (!input.files.some((f) => f.startsWith("adapter/"))) pending.push("the adapter was not downloaded.");
  if (!ev) pending.push(`base vs adapter: run \`agent eval ${input.runId}\` (writes ${EVAL_FILE}).`);
  else if (ev.taskSet.n < MIN_MILESTONE_TASKS) pending.push(`the eval covers ${ev.taskSet.n} test tasks; the milestone needs >= ${MIN_MILESTONE_TASKS}: rerun \`agent eval ${input.runId}\` without --limit.`);
  if (baselineMatch.status === "missing") pending.push("baseline.json: run `agent baseline set` (the verdict is GATED until it exists).");
  if (baselineMatch.status === "mismatch") {
    pending.push(`baseline.json does not match this eval (${baselineMatch.reasons.join("; ")}): reset it with \`agent baseline set --force --reason TEXT\` using the same settings, or rerun the eval to match it.`);
  }
  const looks = input.runsJudged.length;
  if (baselineMatch.status === "match" && looks > 1) {
    pending.push(
      `${looks} runs have been judged on this baseline.json and test split (${input.runsJudged.slice(0, 6).join(", ")}${looks > 6 ? ", ..." : ""}): ` +
        `with ${looks} looks at alpha .05 the chance that at least one null adapter PASSes by luck is up to ${((1 - 0.95 ** looks) * 100).toFixed(0)}%; ` +
        "confirm a winner on the held-out-template split or fresh tasks.",
    );
  }
  if (baseDisagreements) pending.push(`baseline.json and this eval's base variant disagree on ${baseDisagreements} task(s): check that decoding is deterministic.`);
  if (comparison && comparison.requiredN !== null && comparison.requiredN > comparison.n && milestone.downstream.verdict === "INCONCLUSIVE") {
    pending.push(`more test tasks: the observed delta needs n=${comparison.requiredN} pairs for 80% power (have ${comparison.n}).`);
  }
  if (!features.kl) pending.push("KL was not logged (TRL logs `kl` only when beta > 0): the KL columns of the attribution table cannot fire.");
  if (ev && ev.humanAgreement.length === 0) pending.push("human labels: no task row has `human_label`; kappa against humans is pending.");
  if (!tco) pending.push("TCO: run.json has no parameter counts.");
  const power = comparison?.paired && comparison.paired.sdDiff > 0 ? powerCurve(comparison.paired.sdDiff, comparison.n, DOWNSTREAM_MIN_DELTA) : null;
  const compute = !preference && input.timeBreakdown ? computeSide(input.timeBreakdown) : null;
  return { reward, comparison, baseSource, baseDisagreements, baselineMatch, milestone, features, attribution, tco, compute, power, preference, pending };
}

// ---------------------------------------------------------------------------------------------
// Rendering

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

function table(head: string[], rows: string[][]): string {
  return [
    `| ${head.map(cell).join(" | ")} |`,
    `|${head.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`),
  ].join("\n");
}

const pct1 = (x: number) => `${(x * 100).toFixed(1)}%`;
const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : String(x));

function agreementRows(list: Array<Agreement | null>): string[][] {
  return list
    .filter((a): a is Agreement => a !== null)
    .map((a) => [a.what, String(a.n), pct1(a.observedAgreement), a.kappa === null ? "undefined" : a.kappa.toFixed(3), a.se === null ? "-" : a.se.toFixed(3), a.note]);
}

function dateOf(run: Run | null): string {
  const t = run?.endTime ?? run?.startTime ?? run?.createTime;
  return t ? timestampDate(t).toISOString() : "-";
}

function splitRow(label: string, n: number, c: Comparison | null | undefined, variants: EvalRecord["variants"]): string[] {
  const acc = (name: string) => {
    const v = variants.find((x) => x.name === name)?.accuracy;
    return v ? pct1(v.estimate) : "-";
  };
  const d = c?.decision;
  return [
    label,
    String(n),
    acc("base"),
    acc(ADAPTER_VARIANT),
    c?.paired ? pp(c.paired.meanDiff) : "-",
    d ? `${pp(d.lower)} to ${pp(d.upper)} (${d.method})` : "-",
    d && d.p !== null ? `${d.p.toPrecision(2)} (${d.test})` : "-",
    c?.clustered ? `${pp(c.clustered.se).replace("+", "")} (${c.clustered.clusters} templates)` : "-",
  ];
}

/** In-distribution vs held-out templates side by side, per typology with Holm-adjusted p, pass@k. */
function splitsSection(ev: EvalRecord): string[] {
  const out: string[] = [];
  const h = ev.heldOutTemplate;
  out.push("### In-distribution vs held-out templates");
  out.push("");
  out.push(
    `The \`test\` split shares every narrative template with \`train\`: its delta is in-distribution only. ` +
      `\`test_heldout_template\` is written from templates no training row uses, so it asks whether the adapter learned the mapping or the templates. ` +
      "Both columns compare with this eval's own base variant.",
  );
  out.push("");
  const rows = [splitRow(`${ev.taskSet.split} (in-distribution)`, ev.taskSet.n, ev.comparison, ev.variants)];
  if (h) rows.push(splitRow("test_heldout_template", h.taskSet.n, h.comparison, h.variants));
  out.push(table(["split", "tasks", "base", "adapter", "adapter - base", "95% decision CI", "p (governing test)", "SE clustered by template"], rows));
  if (!h) {
    out.push("");
    out.push("_No held-out-template split in this eval (older record, or the task file has no `test_heldout_template` rows)._");
  }
  out.push("");
  const typologyRows = (list: EvalRecord["byTypology"], split: string) =>
    (list ?? []).map((t) => [
      split,
      t.typology,
      String(t.n),
      t.baseAccuracy === null ? "-" : pct1(t.baseAccuracy),
      t.adapterAccuracy === null ? "-" : pct1(t.adapterAccuracy),
      t.delta === null ? "-" : pp(t.delta),
      t.lower === null || t.upper === null ? "-" : `${pp(t.lower)} to ${pp(t.upper)}`,
      t.p === null ? "-" : t.p.toPrecision(2),
      t.pHolm === null ? "-" : t.pHolm.toPrecision(2),
    ]);
  const perTypology = [...typologyRows(ev.byTypology, ev.taskSet.split), ...typologyRows(h?.byTypology, "test_heldout_template")];
  if (perTypology.length > 0) {
    out.push("Per typology (p from the governing test; Holm-adjusted across the typologies of each split):");
    out.push("");
    out.push(table(["split", "typology", "tasks", "base", "adapter", "adapter - base", "95% decision CI", "p", "p (Holm)"], perTypology));
    out.push("");
  }
  const pk = ev.variants.filter((v) => v.passAtK && v.passAtK.length > 0);
  if (pk.length > 0) {
    out.push(
      `With ${ev.settings.samplesPerTask} samples per task the unit is the task (per-task means); unbiased pass@k (Chen et al. 2021): ` +
        pk.map((v) => `${v.name} ${v.passAtK!.map((x) => `pass@${x.k} ${pct1(x.estimate)}`).join(", ")}`).join("; ") +
        ".",
    );
    out.push("");
  }
  return out;
}

/** The ranked-preference section: pairwise accuracy, group win rate, win margin, consistency. */
function preferenceSection(p: PreferenceAnalysis): string[] {
  const out: string[] = [];
  const ci = (x: Interval | null) => (x && Number.isFinite(x.lower) && Number.isFinite(x.upper) ? `${f3(x.lower)} to ${f3(x.upper)}` : "-");
  const num = (x: number | null) => (x === null || !Number.isFinite(x) ? "-" : f3(x));
  out.push("## Ranked preference: held-out groups");
  out.push("");
  out.push(
    `${p.groups} held-out groups (no sampling: every response of a group is scored by the implicit reward beta * log(pi / pi_ref), beta = ${p.beta}). ` +
      "At step 0 the policy is its own reference, so every score is 0 and pairwise accuracy is 0.5 by construction: the change, not a ratio to 0.5, is the signal.",
  );
  out.push("");
  out.push(
    table(
      ["metric", "step 0", "end", "95% CI", "what it is"],
      [
        ["pairwise accuracy", num(p.startPairwise), num(p.endPairwise), `${ci(p.endPairwiseCi)} (bootstrap over groups)`, "share of ordered pairs whose better response scores higher (ties 1/2)"],
        ["pairwise accuracy, end - step 0", "", `${p.change >= 0 ? "+" : ""}${num(p.change)}`, `${ci(p.changeCi)} (paired bootstrap over groups, 2000 resamples, seed 0)`, "the learning signal"],
        ["group win rate", "", num(p.groupWinRate), p.groupWinRateCi ? `${ci(p.groupWinRateCi)} (${p.groupWinRateMethod})` : "-", "share of groups whose top-scored response is in the human top 2"],
        ["win margin", "", num(p.winMargin), p.winMarginCi ? `${ci(p.winMarginCi)} (percentile bootstrap over groups, 2000 resamples, seed 0)` : "- (no per-group margins from the sidecar)", "mean human-rank gap between the model's pick and its runner-up"],
        ["preference consistency", "", num(p.consistency), p.consistencyCi ? `${ci(p.consistencyCi)} (percentile bootstrap over prompts, 2000 resamples, seed 0)` : "- (no per-prompt values from the sidecar)", "mean sd of the implicit score across repeated scoring passes (lower = more consistent)"],
      ],
    ),
  );
  out.push("");
  if (p.trainCurve.length > 0) {
    out.push(
      "Training curve (TRL's DPO metrics, first -> last logged step): " +
        p.trainCurve.map((c) => `${c.key} ${f3(c.first)} -> ${f3(c.last)} (${c.steps} steps)`).join("; ") +
        ". The reward-vs-step plot above is the same run.",
    );
    out.push("");
  }
  if (p.groups < MIN_HELDOUT_PROMPTS) {
    out.push(`_Only ${p.groups} held-out groups: too few for these intervals to mean much (raise preference.num_held_out_groups to >= ${MIN_HELDOUT_PROMPTS})._`);
    out.push("");
  }
  return out;
}

/** The compute side of PPO vs GRPO: this run's measured step time by phase, and a critic's cost beside it. */
function renderCompute(c: ComputeSide, numGenerations: number): string[] {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const g = numGenerations > 0 ? `G = ${numGenerations}` : "G";
  return [
    `Compute, measured in this run (summary.json \`time_breakdown\`: wall time of every training step, mean ${c.stepSeconds.toFixed(3)} s per step):`,
    "",
    table(
      ["phase", "s per step", "share of step"],
      c.phases.map((p) => [p.phase.replace("_", " "), p.seconds.toFixed(4), pct(p.share)]),
    ),
    "",
    table(
      ["", "s per step", "share of this run's step"],
      [
        [`GRPO pays: generation of ${g} rollouts per prompt (measured)`, (c.generationShare * c.stepSeconds).toFixed(4), pct(c.generationShare)],
        ["PPO would add: a policy-sized critic's value forward on the rollout + forward and backward in the update (estimated: 2 x forward + backward as measured here)", c.criticSeconds.toFixed(4), `+${pct(c.criticShare)}`],
      ],
    ),
    "",
    "The critic estimate is a lower bound: a full-parameter critic's backward also computes weight gradients (this run's LoRA backward computes only the adapter's), " +
      "and its AdamW step covers every parameter. PPO with one rollout per prompt generates fewer completions per prompt than GRPO's G; per completion trained, generation costs the same.",
  ];
}

export function renderReport(input: ReportInput, a: ReportAnalysis): string {
  const out: string[] = [];
  const run = input.run;
  const ev = input.evalRecord;
  const m = a.milestone;
  out.push(`# Run \`${input.runId}\`: report`);
  out.push("");
  out.push(`Generated ${input.now.toISOString()} by \`agent report\`. Run state: ${run ? RunState[run.state] : "unknown"}, ended ${dateOf(run)}.`);
  out.push("Scores and rewards are fractions; differences in accuracy are in percentage points (pp); relative changes in %.");
  out.push("");
  out.push(`**Milestone: ${m.verdict}${m.gated ? " (GATED on baseline.json)" : ""}**: ${m.reason}`);
  out.push("");

  // -- plot
  out.push("## Reward curve");
  out.push("");
  if (input.files.includes("reward-vs-step.png")) out.push("![mean reward per training step](reward-vs-step.png)");
  else out.push("_reward-vs-step.png is missing._");
  out.push("");
  const r = run?.result;
  if (run) {
    const g = run.request?.grpo;
    out.push(
      `Steps completed: ${r ? String(r.stepsCompleted) : String(run.currentStep)}` +
        (r ? `, ${r.trainSeconds.toFixed(1)} s of training` : "") +
        (g ? `; G=${g.numGenerations ?? "-"}, beta=${g.beta ?? "-"}, lr=${g.learningRate ?? "-"}, max_completion_length=${g.maxCompletionLength ?? "-"}` : "") +
        `; base model ${run.request?.baseModel || "(embedded default)"}.`,
    );
    out.push("");
  }
  if (input.warnings.length) {
    out.push("Warnings the sidecar raised during training:");
    for (const w of input.warnings) out.push(`- step ${w.step} \`${w.code}\`: ${w.message}`);
    out.push("");
  }

  // -- held-out reward
  if (a.preference) out.push(...preferenceSection(a.preference));
  else out.push("## Held-out reward: step 0 vs end");
  out.push("");
  if (a.preference) {
    // the preference section above replaces the GRPO held-out reward table
  } else if (r?.startReward && r.endReward) {
    const rows = [r.startReward, r.endReward].map((h) => [
      String(h.step),
      f3(h.mean),
      `${f3(h.ciLow)} to ${f3(h.ciHigh)}`,
      h.ciMethod || "-",
      `${h.numPrompts} x ${h.samplesPerPrompt}`,
    ]);
    out.push(table(["step", "mean reward", "95% CI", "CI method", "prompts x samples"], rows));
    out.push("");
    const absolute = r.endReward.mean - r.startReward.mean;
    out.push(
      `Absolute change end - start: **${absolute >= 0 ? "+" : ""}${absolute.toFixed(3)}**; relative change (end - start) / |start|: **${pct(r.relativeChange)}** ` +
        `(95% paired bootstrap CI over prompts ${pct(r.relativeChangeCiLow)} to ${pct(r.relativeChangeCiHigh)}); the milestone needs >= ${pct(REWARD_MIN_RELATIVE_CHANGE, 0)} ` +
        `on at least ${MIN_HELDOUT_PROMPTS} prompts. Same fixed held-out prompts and sampling seed at both ends. ` +
        "A bootstrap resample whose start mean is 0 has an unbounded relative change; a bound that reaches one is printed as unbounded, never dropped.",
    );
  } else {
    out.push("_No held-out result in run.json._");
  }
  out.push("");

  // -- base vs adapter
  out.push("## Base vs adapter on the test split");
  out.push("");
  if (!ev) {
    out.push(`_No eval yet: \`agent eval ${input.runId}\`._`);
  } else {
    out.push(
      `Task set \`${ev.taskSet.path}\` (sha256 \`${ev.taskSet.sha256.slice(0, 12)}…\`), split \`${ev.taskSet.split}\`, **N = ${ev.taskSet.n} tasks**, ` +
        `${ev.settings.samplesPerTask} sample(s) per task, temperature ${ev.settings.temperature}, max_new_tokens ${ev.settings.maxNewTokens}, seed ${ev.settings.seed}; ` +
        `model ${ev.model.requested || "(embedded default)"} -> \`${ev.model.resolved}\`; evaluated ${ev.date}.`,
    );
    out.push("");
    out.push(`Re-grading: all ${ev.regradedScores} sidecar scores (every variant, task, sample and grader) recomputed in TS and equal.`);
    out.push("");
    const graders = ev.settings.graders.map((g) => g.name);
    const accRows: string[][] = [];
    if (a.baselineMatch.status === "match" && input.baseline?.accuracy) {
      const b = input.baseline;
      accRows.push([
        `base (baseline.json, ${b.date.slice(0, 10)})`,
        `${pct1(b.accuracy!.estimate)} (${pct1(b.accuracy!.lower)} to ${pct1(b.accuracy!.upper)}, ${b.accuracy!.method})`,
        String(b.accuracy!.n),
        ...graders.slice(1).map((gname) => (b.meanScores[gname] == null ? "-" : pct1(b.meanScores[gname]!))),
      ]);
    }
    for (const v of ev.variants) {
      accRows.push([
        v.name === "base" ? "base (this eval)" : v.name,
        v.accuracy ? `${pct1(v.accuracy.estimate)} (${pct1(v.accuracy.lower)} to ${pct1(v.accuracy.upper)}, ${v.accuracy.method})` : "-",
        v.accuracy ? String(v.accuracy.n) : "0",
        ...graders.slice(1).map((gname) => (v.meanScores[gname] == null ? "-" : pct1(v.meanScores[gname]!))),
      ]);
    }
    out.push(table(["variant", `${graders[0]} accuracy (95% CI)`, "tasks", ...graders.slice(1).map((gname) => `${gname} mean`)], accRows));
    out.push("");
    const c = a.comparison;
    if (c?.paired && c.bootstrap) {
      const p = c.paired;
      out.push(`Paired by task id, adapter - base, base scores from ${a.baseSource}:`);
      out.push("");
      const dec = c.decision;
      const rows: string[][] = [
        ["pairs (n)", `${c.n}${c.unpaired ? ` (${c.unpaired} unpaired task(s) left out)` : ""}`],
        ["mean difference", `${pp(p.meanDiff)} (${f3(p.meanA)} -> ${f3(p.meanB)})`],
      ];
      if (dec) {
        rows.push([`**95% CI, ${dec.method} (the decision interval)**`, `**${pp(dec.lower)} to ${pp(dec.upper)}**`]);
        rows.push([`**governing test: ${dec.test}**`, dec.p === null ? (dec.rejects ? "rejects 0 (alpha .05)" : "does not reject 0 (alpha .05)") : `p = ${dec.p.toPrecision(3)}: ${dec.rejects ? "rejects" : "does not reject"} 0 (alpha .05)`]);
      }
      // The bootstrap's Monte Carlo error on a 2.5% quantile is ~sqrt(q(1-q)/R)/f(x): about 0.1 pp here,
      // so it is shown to 0.1 pp and never decides.
      rows.push(["95% CI, " + CI_METHOD + " (shown, does not decide)", `${pp(c.bootstrap.lower)} to ${pp(c.bootstrap.upper)}`]);
      rows.push(["95% CI, paired t", `${pp(p.ciT.lower)} to ${pp(p.ciT.upper)}`]);
      rows.push(["sd of differences / SE", `${f3(p.sdDiff)} / ${f3(p.seDiff)} (fractions)`]);
      if (p.discordant && p.mcnemarP !== null) {
        rows.push(["discordant pairs", `base right & adapter wrong ${p.discordant.b}, base wrong & adapter right ${p.discordant.c}`]);
        rows.push(["exact McNemar p (two-sided)", p.mcnemarP.toPrecision(3)]);
      }
      rows.push(["required n for the observed delta (alpha .05 two-sided, power .8)", c.requiredN === null ? `- (${c.requiredNNote})` : `${c.requiredN}${c.requiredNNote ? ` (${c.requiredNNote})` : ""}`]);
      rows.push([`minimum detectable effect at n=${c.n}`, c.mde === null ? "- (the differences have no spread)" : pp(c.mde).replace("+", "")]);
      if (c.clustered) {
        rows.push([
          `sensitivity: SE clustered by ${c.clustered.clusteredBy} (${c.clustered.clusters} clusters, CR1)`,
          `${f3(c.clustered.se)} vs ${f3(c.clustered.iidSe)} unclustered (design effect ${c.clustered.designEffect === null ? "-" : c.clustered.designEffect.toFixed(2)}); ` +
            `95% CI ${pp(p.meanDiff - 1.96 * c.clustered.se)} to ${pp(p.meanDiff + 1.96 * c.clustered.se)}`,
        ]);
      }
      if (p.sdDiff > 0) {
        const oc = operatingCharacteristic(DOWNSTREAM_MIN_DELTA, p.sdDiff, c.n, { threshold: DOWNSTREAM_MIN_DELTA });
        rows.push([
          `P(PASS) / P(CONFIRMED) if the true delta were +${DOWNSTREAM_MIN_DELTA_PP} pp, at n=${c.n} (normal approximation)`,
          `${oc.pPass.toFixed(2)} / ${oc.pConfirm.toFixed(2)}`,
        ]);
      }
      out.push(table(["statistic", "value"], rows));
      out.push("");
      out.push("Formulas: n = ((z_{a/2} + z_b) * sd_d / |delta|)^2 and MDE = (z_{a/2} + z_b) * sd_d / sqrt(n), with z_{a/2} = 1.96, z_b = 0.84.");
    } else {
      out.push(`_No paired comparison: ${c ? c.requiredNNote : "the eval has no base or no adapter variant"}._`);
    }
    if (a.baseDisagreements !== null) {
      out.push("");
      out.push(`Consistency: baseline.json and this eval's base variant differ on ${a.baseDisagreements} task(s).`);
    }
    out.push("");
    out.push(...splitsSection(ev));
    out.push("### Grader agreement (Cohen's kappa)");
    out.push("");
    const kappas = agreementRows([...ev.variants.map((v) => v.graderAgreement), ...ev.humanAgreement]);
    out.push(kappas.length ? table(["raters", "items", "raw agreement", "kappa", "SE", "note"], kappas) : "_No graded items._");
    if (ev.humanAgreement.length === 0) {
      out.push("");
      out.push("No `human_label` in the task file: agreement with human labels is pending.");
    }
  }
  out.push("");

  // -- milestone
  out.push("## Milestone verdict");
  out.push("");
  out.push(
    table(
      ["criterion", "threshold", "verdict", "numbers"],
      [
        [
          "held-out reward, end vs step 0",
          `PASS: >= ${pct(REWARD_MIN_RELATIVE_CHANGE, 0)} and CI lower > 0; CONFIRMED: CI lower >= ${pct(REWARD_MIN_RELATIVE_CHANGE, 0)}; >= ${MIN_HELDOUT_PROMPTS} prompts`,
          m.reward.verdict,
          m.reward.reason,
        ],
        [
          "downstream accuracy, adapter - base",
          `PASS: >= +${DOWNSTREAM_MIN_DELTA_PP} pp and the governing test rejects 0; CONFIRMED: CI lower >= +${DOWNSTREAM_MIN_DELTA_PP} pp; n >= ${MIN_MILESTONE_TASKS}`,
          m.downstream.verdict,
          m.downstream.reason,
        ],
        [
          "baseline.json",
          "present and matching",
          a.baselineMatch.status === "match" ? "OK" : "GATED",
          (a.baselineMatch.status === "mismatch" ? a.baselineMatch.reasons.join("; ") : a.baselineMatch.status) +
            (input.baseline ? `; ${input.runsJudged.length} run(s) judged on it` : "") +
            (input.baseline?.replaced
              ? `; it REPLACED the baseline of ${input.baseline.replaced.previousDate} (${input.baseline.replaced.runsJudgedOnPrevious} run(s) had been judged on that one): "${input.baseline.replaced.reason}"`
              : ""),
        ],
      ],
    ),
  );
  out.push("");
  out.push(`**${m.verdict}**${m.gated ? " (GATED on baseline.json)" : ""}: ${m.reason}`);
  out.push("");
  const dec = a.comparison?.decision;
  out.push(
    `How to read it: CONFIRMED means the interval's lower bound clears the threshold itself; PASS is a point-estimate gate ` +
      `(the estimate clears the threshold and the interval excludes 0), so a model whose true effect equals the threshold passes about half the time at large n. ` +
      (dec ? `The downstream test that governs "excludes 0" is the ${dec.test} (interval: ${dec.method}). ` : "") +
      (a.power ? `Power curve (P(PASS) against the true delta, for several n): ![P(PASS) vs true delta](${POWER_SVG}) (data: \`${POWER_CSV}\`).` : ""),
  );
  out.push("");

  // -- attribution
  out.push("## Attribution (DESIGN.md's table applied to this run)");
  out.push("");
  if (a.preference) {
    out.push("_Not applicable to a ranked-preference run: the table reads GRPO's reward curve, KL and frac_reward_zero_std. See the ranked-preference section._");
    out.push("");
  }
  out.push("What the curves show:");
  out.push("");
  for (const line of describeFeatures(a.features)) out.push(`- ${line}`);
  out.push("");
  const fired = a.attribution.filter((x) => x.fired);
  if (fired.length === 0) {
    out.push("**No row of the table fired for this run.**");
    const near = nearMisses(a.attribution);
    if (near.length > 0) {
      out.push("");
      out.push("Nearest rows (every condition held but one; read together, they say what this run looks like):");
      out.push("");
      for (const x of near) {
        out.push(`- **${x.row.curve} / KL ${x.row.kl} / frac_reward_zero_std ${x.row.fracZeroStd}** (likely cause _${x.row.likelyCause}_; next change _${x.row.nextChange}_): every condition held except this run's "${x.missed[0]}".`);
      }
    }
  } else {
    out.push("Rows that fired:");
    out.push("");
    for (const x of fired) {
      out.push(`- **${x.row.curve} / KL ${x.row.kl} / frac_reward_zero_std ${x.row.fracZeroStd}**: likely cause _${x.row.likelyCause}_; next change: _${x.row.nextChange}_ (${x.evidence}).`);
    }
  }
  out.push("");
  out.push(
    table(
      ["reward curve", "KL", "frac_reward_zero_std", "likely cause", "next change", "fired", "conditions on this run"],
      a.attribution.map((x) => [x.row.curve, x.row.kl, x.row.fracZeroStd, x.row.likelyCause, x.row.nextChange, x.fired ? "**yes**" : "no", x.evidence]),
    ),
  );
  out.push("");
  out.push("Thresholds are the named constants in `ts_agent/src/agent/report/attribution.ts`.");
  out.push("");

  // -- TCO
  out.push(a.preference ? "## PPO (RLHF) vs DPO: total cost of ownership" : "## PPO vs GRPO: total cost of ownership");
  out.push("");
  if (!a.tco) {
    out.push("_run.json has no parameter counts._");
  } else {
    const t = a.tco.input;
    const b = bytesPerParam(t.precision);
    out.push(
      `This model: P = ${t.baseParams.toLocaleString("en-US")} base parameters, L = ${t.loraParams.toLocaleString("en-US")} LoRA parameters (trainable), ` +
        `precision ${a.tco.precisionNote} so b = ${b} bytes per weight and gradient; AdamW keeps 2 fp32 states = 8 bytes per trainable parameter; beta = ${t.beta} ` +
        `(${a.preference ? "DPO always needs the reference model: its implicit reward is beta * log(pi / pi_ref)" : t.beta > 0 ? "a reference model is needed" : "no reference model"}).`,
    );
    out.push("");
    const rows: string[][] = [];
    for (const cfg of a.tco.configs) {
      for (const l of cfg.lines) {
        rows.push([cfg.name, l.role, formatBytes(l.weights), formatBytes(l.gradients), formatBytes(l.optimizer), formatBytes(l.total), l.formula]);
      }
      rows.push([cfg.name, "**total**", "", "", "", `**${formatBytes(cfg.total)}** (${cfg.total.toLocaleString("en-US")} B)`, ""]);
    }
    out.push(table(["setup", "model", "weights", "gradients", "AdamW states", "total", "formula (bytes)"], rows));
    out.push("");
    out.push(
      "Weights, gradients and optimizer states only: activations, KV cache for the G generations, and fp32 master weights under mixed precision " +
        "(+4 bytes per trainable parameter when b = 2) come on top. With LoRA the reference is the policy with its adapter disabled (no extra bytes); " +
        "the PPO reward model is assumed the size of the policy and frozen; the critic is a policy-sized value model trained alongside it.",
    );
    out.push("");
    if (a.compute) out.push(...renderCompute(a.compute, input.run?.request?.grpo?.numGenerations ?? 0), "");
    out.push(table(["", "PPO", "GRPO (this project)"], TCO_QUALITATIVE.map((q) => [q.aspect, q.ppo, q.grpo])));
  }
  out.push("");

  // -- pending
  out.push("## Pending");
  out.push("");
  if (a.pending.length === 0) out.push("Nothing: every input of this report is present.");
  for (const p of a.pending) out.push(`- ${p}`);
  out.push("");

  // -- files
  out.push("## Files in this folder");
  out.push("");
  for (const f of input.files.filter((f) => !f.startsWith("adapter/"))) out.push(`- \`${f}\``);
  const adapterFiles = input.files.filter((f) => f.startsWith("adapter/"));
  if (adapterFiles.length) out.push(`- \`adapter/\` (${adapterFiles.map((f) => f.slice("adapter/".length)).join(", ")})`);
  out.push("");
  return out.join("\n");
}

/** Load, analyze, render and write agent-evals/runs/<run_id>/report.md atomically. */
export function writeReport(evalsDir: string, runId: string, now = new Date()): { path: string; analysis: ReportAnalysis } {
  const input = loadReportInput(evalsDir, runId, now);
  const analysis = analyzeReport(input);
  const written = [REPORT_FILE];
  if (analysis.power) {
    writeFileAtomic(join(evalsDir, "runs", runId, POWER_CSV), powerCsv(analysis.power));
    writeFileAtomic(join(evalsDir, "runs", runId, POWER_SVG), powerSvg(analysis.power));
    written.push(POWER_CSV, POWER_SVG);
  }
  for (const f of written) if (!input.files.includes(f)) input.files.push(f);
  input.files.sort();
  const path = join(evalsDir, "runs", runId, REPORT_FILE);
  writeFileAtomic(path, renderReport(input, analysis));
  return { path, analysis };
}
