/**
 * Exporters of any eval log (a task file's or an agent task's), as CI users of promptfoo, evalite
 * and vitest-evals expect: JUnit XML beside eval.json (one testcase per task, failed when the
 * candidate's primary per-task score is below PASS_SCORE, the verdict and the accuracies as
 * properties), and the --threshold gate (the candidate's primary accuracy below T: exit 1).
 * The candidate is the adapter when the eval has one, else the base (a base-only eval).
 */
import { basename, dirname, join } from "node:path";

import { fromJson } from "@bufbuild/protobuf";

import { EvaluateResultSchema } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { ADAPTER_VARIANT } from "../core/base-vs-adapter.js";
import { EVAL_FILE, type EvalLog } from "../core/eval-log.js";
import type { CriterionResult } from "../verdict/milestone.js";
import { writeFileAtomic } from "../workspace.js";

/** A task passes when its primary per-task score (mean over its samples) is at least this. */
export const PASS_SCORE = 0.5;

/** junit.xml beside eval.json; junit-limit-<n>.xml beside a partial eval-limit-<n>.json. */
export function junitPathFor(evalPath: string): string {
  const name = basename(evalPath);
  return join(dirname(evalPath), name === EVAL_FILE ? "junit.xml" : name.replace(/^eval/, "junit").replace(/\.json$/, ".xml"));
}

function xml(s: string): string {
  // characters XML 1.0 cannot carry at all are dropped; the five specials escaped
  return s
    .replace(/[^\x09\x0A\x0D\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

/** The variant a threshold and the testcases judge: the adapter, else the base. */
export function candidateOf(log: EvalLog): EvalLog["variants"][number] | undefined {
  return log.variants.find((v) => v.name === ADAPTER_VARIANT) ?? log.variants.find((v) => v.name === "base");
}

/** JUnit XML of an eval log: one testcase per task of the candidate variant. */
export function junitXml(log: EvalLog, verdict: CriterionResult | null): string {
  const candidate = candidateOf(log);
  const primary = log.settings.graders[0]?.name ?? "";
  const suite = log.agentTask ? `agent eval: ${log.agentTask.name}` : `agent eval: ${log.taskSet.path}`;
  const result = fromJson(EvaluateResultSchema, log.result);
  const samples = new Map((result.variants.find((v) => v.name === candidate?.name)?.tasks ?? []).map((t) => [t.taskId, t.samples]));
  const cases: string[] = [];
  let failures = 0;
  let skipped = 0;
  for (const [id, score] of Object.entries(candidate?.perTask ?? {})) {
    const open = `    <testcase classname="${xml(suite)}" name="${xml(id)}">`;
    if (score === null) {
      skipped++;
      cases.push(`${open}<skipped message="unscorable"/></testcase>`);
    } else if (score < PASS_SCORE) {
      failures++;
      const first = samples.get(id)?.[0];
      const body = log.agentTask
        ? `final answer: ${first?.completion ?? ""}; ended by ${first?.episode?.endedBy ?? "?"}`
        : `completion: ${first?.completion ?? ""}`;
      cases.push(`${open}<failure message="${xml(`${primary} = ${score.toFixed(2)} < ${PASS_SCORE}`)}">${xml(body)}</failure></testcase>`);
    } else {
      cases.push(`${open}</testcase>`);
    }
  }
  const props: Array<[string, string]> = [
    ["run", log.runId],
    ["candidate", candidate?.name ?? ""],
    ["primary_scorer", primary],
    ...log.variants.map((v): [string, string] => [`${v.name}_accuracy`, v.accuracy ? String(v.accuracy.estimate) : ""]),
    ...(verdict
      ? ([
          ["verdict", verdict.verdict],
          ["verdict_reason", verdict.reason],
        ] as Array<[string, string]>)
      : []),
  ];
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n` +
    `  <testsuite name="${xml(suite)}" tests="${cases.length}" failures="${failures}" skipped="${skipped}">\n` +
    `    <properties>${props.map(([k, v]) => `<property name="${xml(k)}" value="${xml(v)}"/>`).join("")}</properties>\n` +
    `${cases.join("\n")}\n  </testsuite>\n</testsuites>\n`
  );
}

/** Write junit.xml beside the eval log at `evalPath`; returns its path. */
export function writeJunit(evalPath: string, log: EvalLog, verdict: CriterionResult | null): string {
  const path = junitPathFor(evalPath);
  writeFileAtomic(path, junitXml(log, verdict));
  return path;
}

/** The --threshold gate: "" when the candidate's primary accuracy is at least `threshold`, else
 *  the line that says why the exit code is 1. */
export function thresholdFailure(log: EvalLog, threshold: number): string {
  const c = candidateOf(log);
  const acc = c?.accuracy?.estimate ?? NaN;
  if (Number.isFinite(acc) && acc >= threshold) return "";
  const name = c?.name ?? "the candidate";
  return `threshold: ${name}'s ${log.settings.graders[0]?.name ?? "primary"} accuracy ${Number.isFinite(acc) ? `${(100 * acc).toFixed(1)}%` : "(none)"} is below ${(100 * threshold).toFixed(1)}%: exit 1`;
}
