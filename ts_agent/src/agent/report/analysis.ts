/**
 * The report's analysis: the run's verdict (verdict/verdict.ts, computed once, nothing
 * recomputed here) plus what only the report shows: the curve features and the attribution table
 * applied to them, the TCO inputs and the compute side, the power curve, the ranked-preference
 * numbers, and what is still pending. Pure: `analyzeReport(loadReportInput(...))`.
 *
 * A section (sections/*.ts) is a ReportSection: it renders its Markdown from the input and this
 * analysis; numbers only it shows it may compute itself, in its own file, from the input.
 */
import { RunState } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { EVAL_FILE, olderLogNote } from "../core/eval-log.js";
import { DOWNSTREAM_MIN_DELTA, MIN_MILESTONE_TASKS } from "../verdict/milestone.js";
import { judgeRun, type RunVerdict } from "../verdict/verdict.js";
import { answerAnalysis, answerSignal, type AnswerAnalysis } from "./answer-analysis.js";
import { attribute, type RowResult } from "./attribution.js";
import { curveFeatures, type CurveFeatures } from "./curve-features.js";
import type { ReportInput } from "./input.js";
import { powerCurve, type PowerCurve } from "./power-curve.js";
import { preferenceAnalysis, type PreferenceAnalysis } from "./preference.js";
import { computeSide, tcoFor, type ComputeSide, type TcoFor } from "./tco.js";

export interface ReportAnalysis extends RunVerdict {
  features: CurveFeatures;
  /** what each variant answers, for closed label sets (null otherwise) */
  answers: AnswerAnalysis | null;
  /** why confusion-matrix.png was not drawn (writeReport fills it); "" or absent when it was */
  answersPlotNote?: string;
  attribution: RowResult[];
  tco: TcoFor | null;
  /** the compute side of PPO vs GRPO, from summary.json's time_breakdown (GRPO runs) */
  compute?: ComputeSide | null;
  /** P(PASS) against the true delta for several n; null without a paired comparison with spread */
  power: PowerCurve | null;
  /** ranked-preference runs only: their own held-out metrics */
  preference: PreferenceAnalysis | null;
  pending: string[];
}

/** One section of report.md: its lines (ending with a blank line), from the input and the analysis. */
export type ReportSection = (input: ReportInput, a: ReportAnalysis) => string[];

/** What is missing or worth doing next, one sentence each. */
function pendingItems(input: ReportInput, v: RunVerdict, features: CurveFeatures, tco: TcoFor | null, preference: PreferenceAnalysis | null): string[] {
  const pending: string[] = [];
  const { run, evalLog: ev } = input;
  const { baselineMatch, comparison, milestone, baseDisagreements } = v;
  if (!run) pending.push("run.json is missing: the run was not followed to its end by `agent train` / `agent demo`.");
  else if (run.state !== RunState.SUCCEEDED) pending.push(`the run is ${RunState[run.state]}${run.reason ? ` (${run.reason})` : ""}, not SUCCEEDED.`);
  if (!v.reward) pending.push("held-out start/end reward: not in run.json.");
  // a ranked-preference run draws no reward-vs-step.png and logs no KL: its curve is the report's own
  if (!preference && !input.files.includes("reward-vs-step.png")) pending.push("reward-vs-step.png was not downloaded.");
  if (preference && preference.curve.length === 0) pending.push("the held-out pairwise accuracy curve: no logged step in events.jsonl carries it.");
  if (!input.files.some((f) => f.startsWith("adapter/"))) pending.push("the adapter was not downloaded.");
  if (!ev && baselineMatch.status === "own") {
    pending.push(
      "downstream: a ranked-preference run trained on ranked groups, not test tasks: it is judged on its own held-out groups against step 0 (the ranked-preference section), with no downstream verdict.",
    );
  } else if (!ev) pending.push(`base vs adapter: run \`agent eval ${input.runId}\` (writes ${EVAL_FILE}).`);
  else if (ev.taskSet.n < MIN_MILESTONE_TASKS) {
    // --limit is advice only when one was used and it cut the split short (n == limit)
    const limited = ev.settings.limit > 0 && ev.taskSet.n >= ev.settings.limit;
    pending.push(
      limited
        ? `the eval covers ${ev.taskSet.n} test tasks (--limit ${ev.settings.limit}); the milestone needs >= ${MIN_MILESTONE_TASKS}: rerun \`agent eval ${input.runId}\` without --limit.`
        : `the eval covers ${ev.taskSet.n} test tasks, every test task of the file; the milestone needs >= ${MIN_MILESTONE_TASKS}: add test tasks to ${ev.taskSet.path} (\`agent plan\` gives the n the observed effect needs).`,
    );
  }
  if (ev && olderLogNote(ev)) pending.push(`${olderLogNote(ev)}.`);
  if (baselineMatch.status === "missing") pending.push("baseline.json: run `agent baseline set` (the verdict is GATED until it exists).");
  if (baselineMatch.status === "mismatch") {
    pending.push(
      `baseline.json does not match this eval (${baselineMatch.reasons.join("; ")}): reset it with \`agent baseline set --force --reason TEXT\` using the same settings, or rerun the eval to match it.`,
    );
  }
  const looks = input.runsJudged.length;
  if (baselineMatch.status === "match" && looks > 1) {
    pending.push(
      `${looks} runs have been judged on this baseline.json and test split (${input.runsJudged.slice(0, 6).join(", ")}${looks > 6 ? ", ..." : ""}): ` +
        `with ${looks} looks at alpha .05 the chance that at least one null adapter PASSes by luck is up to ${((1 - 0.95 ** looks) * 100).toFixed(0)}%; ` +
        "confirm a winner on the held-out-template split or fresh tasks.",
    );
  }
  if (baseDisagreements && !v.consistency?.gates) pending.push(`${v.consistency!.text}: within what the decoding allows, but worth a look.`);
  if (v.adapter && v.adapter.status !== "same") pending.push(`${v.adapter.text}.`);
  if (comparison && comparison.requiredN !== null && comparison.requiredN > comparison.n && milestone.downstream.verdict === "INCONCLUSIVE") {
    pending.push(`more test tasks: the observed delta needs n=${comparison.requiredN} pairs for 80% power (have ${comparison.n}).`);
  }
  if (!features.kl && !preference) pending.push("KL was not logged (TRL logs `kl` only when beta > 0): the KL columns of the attribution table cannot fire.");
  if (ev && ev.humanAgreement.length === 0) pending.push("human labels: no task row has `human_label`; kappa against humans is pending.");
  if (!tco) pending.push("TCO: run.json has no parameter counts.");
  return pending;
}

export function analyzeReport(input: ReportInput): ReportAnalysis {
  const preference = preferenceAnalysis(input.run, input.steps);
  const verdict = judgeRun({
    run: input.run,
    evalLog: input.evalLog,
    baseline: input.baseline,
    baselineFile: input.baselineFile,
    preference: preference !== null,
  });
  const features = curveFeatures(input.steps);
  const tco = tcoFor(input.run);
  const c = verdict.comparison;
  const answers = answerAnalysis(input.evalLog);
  return {
    ...verdict,
    features,
    answers,
    attribution: attribute(features, verdict.signal, answerSignal(answers)),
    tco,
    compute: !preference && input.timeBreakdown ? computeSide(input.timeBreakdown) : null,
    power: c?.paired && c.paired.sdDiff > 0 ? powerCurve(c.paired.sdDiff, c.n, DOWNSTREAM_MIN_DELTA) : null,
    preference,
    pending: pendingItems(input, verdict, features, tco, preference),
  };
}
