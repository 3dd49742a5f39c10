/** The top of report.md: title, when and how the run ended, the milestone headline, the run's
 *  curve (GRPO: reward-vs-step.png; ranked preference: held-out pairwise accuracy) with its
 *  settings, and the warnings the sidecar raised. */
import { timestampDate } from "@bufbuild/protobuf/wkt";

import { RunState, type Run, type TrainRequest } from "../../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { passLine } from "../../replicate/across-seeds.js";
import { codeLine } from "../../code-revision.js";
import type { ReportSection } from "../analysis.js";
import type { ReportInput } from "../input.js";
import { f3 } from "../markdown.js";
import { PREFERENCE_CSV, PREFERENCE_SVG } from "../preference-curve.js";
import type { PreferenceAnalysis } from "../preference.js";
import type { StepMetrics } from "../curve-features.js";
import { effectiveZeroStd } from "../thresholds.js";
import { reasonAfterLabel } from "../../verdict/milestone.js";

function dateOf(run: Run | null): string {
  const t = run?.endTime ?? run?.startTime ?? run?.createTime;
  return t ? timestampDate(t).toISOString() : "-";
}

/** The verdict is one draw of the training randomness: say so once, and how to replicate it. */
function oneDraw(input: ReportInput): string {
  const seed = input.run?.request?.grpo?.seed;
  const head =
    `This verdict is one draw of the training randomness${seed === undefined ? "" : ` (seed ${String(seed)}`}` +
    `${seed === undefined ? "" : " on this machine)"}: another seed, or another machine's floating-point order, trains another adapter.`;
  const sw = input.sweep;
  if (sw) {
    const s = sw.summary;
    return `${head} This run is one of ${s.seeds.length} seeds of sweep \`${s.sweepId}\`: ${passLine(s)}; see [the sweep's report](${sw.report}) and the Replicates section below.`;
  }
  return `${head} To see how the recipe replicates: \`agent sweep --from-run ${input.runId} --seeds 10\` (the same request under 10 seeds, each judged by these rules).`;
}

/** A GRPO run's curve: the sidecar's reward-vs-step.png. */
function rewardCurveLines(input: ReportInput): string[] {
  const out = ["## Reward curve", ""];
  if (input.files.includes("reward-vs-step.png")) out.push("![mean reward per training step](reward-vs-step.png)");
  else out.push("_reward-vs-step.png is missing._");
  out.push("");
  return out;
}

/** A ranked-preference run's curve: held-out pairwise accuracy per logged step (writeReport draws
 *  preference-vs-step.svg from the events; the sidecar's CSV has the same steps). */
function preferenceCurveLines(input: ReportInput, p: PreferenceAnalysis): string[] {
  const out = ["## Held-out pairwise accuracy curve", ""];
  if (p.curve.length === 0) {
    out.push("_No logged step carries heldout/pairwise_accuracy (events.jsonl missing or empty): no curve to draw._");
  } else {
    out.push(`![held-out pairwise accuracy per logged step](${PREFERENCE_SVG})`);
    out.push("");
    const first = p.curve.find((c) => Number.isFinite(c.heldOut));
    const last = [...p.curve].reverse().find((c) => Number.isFinite(c.heldOut));
    out.push(
      `${p.curve.length} logged steps` +
        (first && last ? `; held-out pairwise accuracy ${f3(first.heldOut)} at step ${first.step} -> ${f3(last.heldOut)} at step ${last.step}` : "") +
        " (0.5 at step 0 by construction: the policy is its own reference)" +
        (input.files.includes(PREFERENCE_CSV) ? `; every step's metrics: \`${PREFERENCE_CSV}\`.` : "."),
    );
  }
  out.push("");
  return out;
}

/** What the sidecar trains with when a request names no rewards (py_trainer/core/config.py DEFAULT_REWARDS). */
export const SIDECAR_DEFAULT_REWARDS: ReadonlyArray<{ name: string; weight: number }> = [
  { name: "exact_match", weight: 1 },
  { name: "format", weight: 0.2 },
];

/**
 * The rewards a GRPO run trained with and what each criterion judges (issue 32, item 3): the
 * held-out criterion is the same weighted sum as the training reward (0 to the sum of the
 * weights: a fraction only when they sum to 1); the downstream delta is the eval's grader alone.
 * A format reward adds a near-constant once the model writes the tags, which raises both ends of
 * the held-out ratio and shrinks its relative change. Also the base model and the task file.
 */
export function rewardsLines(request: TrainRequest | undefined, judged: { grader: string; taskFile: string | null }): string[] {
  const named = request?.rewards ?? [];
  const rewards = named.length ? named.map((r) => ({ name: r.name, weight: r.weight || 1 })) : SIDECAR_DEFAULT_REWARDS;
  const top = rewards.reduce((s, r) => s + Math.max(0, r.weight), 0);
  const list = rewards.map((r) => `${r.name} x${r.weight}`).join(", ");
  const lines = [
    `Rewards trained with: ${list}${named.length ? "" : " (the request named none: the sidecar's default)"}. ` +
      `The held-out criterion judges the same weighted sum (0 to ${top}${top === 1 ? "" : "; not a fraction"}); the downstream grader: ${judged.grader}.`,
  ];
  const format = rewards.find((r) => r.name === "format");
  if (format && rewards.length > 1) {
    lines.push(
      `The format reward (x${format.weight}) is near-constant once completions carry the answer tags: it raises both ends of the held-out ratio and dilutes its relative change ` +
        "(judge the task's grader alone with a request whose rewards name only it; the downstream delta already does).",
    );
  }
  lines.push(`Base model: ${request?.baseModel || "the embedded default model"}. Task file: ${judged.taskFile ?? "not recorded (no eval.json)"}.`);
  return lines;
}

/**
 * The warning of a run in which GRPO had nothing to learn from: every logged step's groups all
 * had equal rewards (thresholds.ts effectiveZeroStd = 1 at every step). A SUCCEEDED state says
 * nothing about it; this says it first. "" when some step had a group with a spread, or no step
 * logged the share.
 */
export function noSignalWarning(steps: ReadonlyArray<StepMetrics>): string {
  const shares = steps.map((s) => effectiveZeroStd(s.metrics));
  if (shares.length === 0 || shares.some((x) => x === null || x < 1)) return "";
  return (
    `**No signal: in every one of the ${shares.length} logged steps every group's rewards were equal (frac_reward_zero_std 1.00): ` +
    "GRPO's advantages were all 0, so training changed nothing, whatever the run's state says.** A base that never succeeds (or always does) " +
    "gives GRPO nothing to learn: run the preflight (`agent plan --agent-task FILE`) before training, and give it a signal: a warm start " +
    "(`agent warmstart`), more episodes per group, or a reward with partial credit (docs/agents.md)."
  );
}

export const overview: ReportSection = (input, a) => {
  const out: string[] = [];
  const run = input.run;
  out.push(`# Run \`${input.runId}\`: report`);
  out.push("");
  out.push(`Generated ${input.now.toISOString()} by \`agent report\`. Run state: ${run ? RunState[run.state] : "unknown"}, ended ${dateOf(run)}.`);
  out.push(codeLine(input.evalLog?.fingerprint?.code?.sidecar));
  out.push(
    "Accuracies and exact-match scores are fractions; differences in accuracy are in percentage points (pp); relative changes in %; a reward is a weighted sum (its range below).",
  );
  out.push("");
  out.push(`**Milestone: ${a.label}**: ${reasonAfterLabel(a.milestone)}`);
  out.push("");
  const flat = noSignalWarning(input.steps);
  if (flat) out.push(flat, "");
  out.push(oneDraw(input));
  out.push("");
  const p = a.preference;
  out.push(...(p ? preferenceCurveLines(input, p) : rewardCurveLines(input)));
  const r = run?.result;
  if (run) {
    const g = run.request?.grpo;
    const knobs = p
      ? `; ${p.settings.map(([k, v]) => `${k}=${v}`).join(", ")}`
      : g
        ? `; G=${g.numGenerations ?? "-"}, beta=${g.beta ?? "-"}, lr=${g.learningRate ?? "-"}, max_completion_length=${g.maxCompletionLength ?? "-"}`
        : "";
    out.push(
      `Steps completed: ${r ? String(r.stepsCompleted) : String(run.currentStep)}` +
        (r ? `, ${r.trainSeconds.toFixed(1)} s of training` : "") +
        knobs +
        `; base model ${run.request?.baseModel || "(embedded default)"}.`,
    );
    out.push("");
    if (!p)
      out.push(
        ...rewardsLines(run.request, { grader: input.evalLog?.fingerprint?.grader ?? "exact_match", taskFile: input.evalLog?.taskSet.path ?? null }),
        "",
      );
  }
  if (input.warnings.length) {
    out.push("Warnings the sidecar raised during training:");
    for (const w of input.warnings) out.push(`- step ${w.step} \`${w.code}\`: ${w.message}`);
    out.push("");
  }
  return out;
};
