/**
 * Base vs adapter on the test split: the task set and settings, re-grading, accuracy per variant,
 * the comparison the milestone judges (decision interval and governing test first; bootstrap,
 * paired t, McNemar, required n, MDE, the template-clustered SE shown beside it), in-distribution
 * vs held-out templates, per slice (the task set's slice field), pass@k, and grader agreement. Every number comes from the
 * verdict (verdict/verdict.ts) or the eval log's results; nothing is recomputed here.
 */
import { ADAPTER_VARIANT, CI_METHOD, NO_VARIANCE_TEST, UNDEFINED_TEST, type Comparison, type SliceComparison } from "../../core/base-vs-adapter.js";
import { olderLogNote, type Agreement, type EvalLog, type TaskSetRef } from "../../core/eval-log.js";
import { GATE_SIMULATION_DRAWS, GATE_SIMULATION_SEED } from "../../core/stats/index.js";
import { skippedFeatures } from "../../core/task-format.js";
import { fingerprintUnchecked, fingerprintWarnings } from "../../eval/fingerprint.js";
import { DOWNSTREAM_MIN_DELTA_PP, pp } from "../../verdict/milestone.js";
import { decisionInterval, type SplitComparison } from "../../verdict/verdict.js";
import type { ReportSection } from "../analysis.js";
import { f3, pct1, table } from "../markdown.js";

/** What the task set cannot have, each with the field that would enable it (older logs: none). */
export function taskSetSkips(ref: TaskSetRef): string[] {
  if (ref.hasTemplates === undefined) return [];
  return skippedFeatures({
    labels: ref.labels ?? null,
    hasTemplates: ref.hasTemplates,
    hasSlices: true,
    sliceField: ref.sliceField ?? "slice",
    labelField: ref.labelField ?? "label",
  });
}

function splitRow(label: string, n: number, c: Comparison | null | undefined, variants: EvalLog["variants"]): string[] {
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
    d ? `${decisionInterval(d)} (${d.method})` : "-",
    d && d.p !== null ? `${d.p.toPrecision(2)} (${d.test})` : "-",
    c?.clustered ? `${pp(c.clustered.se).replace("+", "")} (${c.clustered.clusters} templates)` : "-",
  ];
}

/** In-distribution vs held-out templates side by side, per slice with Holm-adjusted p, pass@k;
 *  what the task set cannot have (no templates, no slice field) is named with the field it lacks.
 *  The comparisons are the verdict's (`splits`: the same computation as the comparison table's). */
function splitsSection(ev: EvalLog, splits: ReadonlyArray<SplitComparison>): string[] {
  const out: string[] = [];
  const [main, h] = [splits[0], splits[1] as SplitComparison | undefined];
  out.push("### In-distribution vs held-out templates");
  out.push("");
  const skipped = taskSetSkips(ev.taskSet);
  if (skipped.length > 0) {
    out.push(`Skipped for this task set (${ev.taskSet.path}; docs/tasks.md says which field enables each):`, "", ...skipped.map((s) => `- ${s}`), "");
  }
  if (ev.taskSet.hasTemplates !== false) {
    out.push(
      `The \`test\` split shares every narrative template with \`train\`: its delta is in-distribution only. ` +
        `\`test_heldout_template\` is written from templates no training row uses, so it asks whether the adapter learned the mapping or the templates. ` +
        "Both columns compare with this eval's own base variant.",
    );
    out.push("");
  }
  const rows = [splitRow(`${ev.taskSet.split} (in-distribution)`, ev.taskSet.n, main?.comparison, ev.variants)];
  if (h) rows.push(splitRow("test_heldout_template", h.taskSet.n, h.comparison, h.variants));
  out.push(table(["split", "tasks", "base", "adapter", "adapter - base", "95% decision CI", "p (governing test)", "SE clustered by template"], rows));
  if (!h) {
    out.push("");
    out.push("_No held-out-template split in this eval (older record, or the task file has no `test_heldout_template` rows)._");
  }
  out.push("");
  const sliceRows = (list: SliceComparison[] | undefined, split: string) =>
    (list ?? []).map((t) => [
      split,
      t.slice,
      String(t.n),
      t.baseAccuracy === null ? "-" : pct1(t.baseAccuracy),
      t.adapterAccuracy === null ? "-" : pct1(t.adapterAccuracy),
      t.delta === null ? "-" : pp(t.delta),
      t.lower === null || t.upper === null
        ? t.test === NO_VARIANCE_TEST || t.test === UNDEFINED_TEST
          ? "- (no variance)"
          : "-"
        : `${pp(t.lower)} to ${pp(t.upper)}`,
      t.p === null ? (t.test === UNDEFINED_TEST ? UNDEFINED_TEST : "-") : `${t.p.toPrecision(2)}${t.test === NO_VARIANCE_TEST ? ` (${NO_VARIANCE_TEST})` : ""}`,
      t.pHolm === null ? "-" : t.pHolm.toPrecision(2),
    ]);
  const field = ev.taskSet.sliceField ?? "slice";
  const perSlice = [...sliceRows(main?.bySlice, ev.taskSet.split), ...sliceRows(h?.bySlice, "test_heldout_template")];
  if (perSlice.length === 0) {
    out.push(`_No per-${field} table: the tasks carry no \`${field}\` field (docs/tasks.md)._`, "");
  } else {
    out.push(
      `Per ${field} (p from the governing test; Holm-adjusted across the values of \`${field}\` in each split that have a p). ` +
        "Where the per-task differences have no spread, p is the exact sign test's (or undefined when every difference is 0) and there is no interval: a zero-width t interval would read certainty.",
    );
    out.push("");
    out.push(table(["split", field, "tasks", "base", "adapter", "adapter - base", "95% decision CI", "p", "p (Holm)"], perSlice));
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

/** baseline.json's fingerprint against this eval's, field by field, with the per-task check and
 *  the adapter the eval scored (verdict.ts computes all three; docs/verdict.md has the rule). */
function fingerprintSection(a: Parameters<ReportSection>[1]): string[] {
  const out: string[] = ["### baseline.json vs this eval: the fingerprint", ""];
  if (a.adapter) out.push(`Adapter: ${a.adapter.text}.`, "");
  if (!a.fingerprint) {
    out.push("_No baseline.json to compare with._", "");
    return out;
  }
  out.push(
    "The delta above is taken against this eval's own base variant; baseline.json guards it. A difference in a field marked _gates_ " +
      "(task set, grader, model, prompt, decoding, device, dtype) makes the verdict GATED; one marked _warns_ (batch size, library versions) is only shown.",
  );
  out.push("");
  out.push(
    table(
      ["field", "baseline.json", "this eval", "a difference", "status"],
      a.fingerprint.map((r) => [
        r.field,
        r.baseline,
        r.eval,
        r.effect,
        r.status === "differs" ? `**differs**${r.note ? ` (${r.note})` : ""}` : r.note && r.status !== "same" ? `${r.status}: ${r.note}` : r.status,
      ]),
    ),
  );
  out.push("");
  const unchecked = fingerprintUnchecked(a.fingerprint);
  if (unchecked.length) {
    out.push(
      `Fingerprint incomplete: ${unchecked.join(", ")} not recorded on one side (a file written before the fingerprint existed), so these checks could not be made; they do not gate.`,
      "",
    );
  }
  const warnings = fingerprintWarnings(a.fingerprint);
  if (warnings.length) out.push(`Warning: ${warnings.join("; ")} (shown, does not gate).`, "");
  if (a.consistency) out.push(`Per-task check: ${a.consistency.text}${a.consistency.gates ? " — **the verdict is GATED on it**" : ""}.`, "");
  return out;
}

/** "exact_match_lenient vs exact_match_lenient (base)": one grader on both sides. */
function selfComparison(what: string): boolean {
  const m = /^(\S+) vs (\S+) \(/.exec(what);
  return m !== null && m[1] === m[2];
}

function agreementRows(list: Array<Agreement | null>): string[][] {
  return list
    .filter((a): a is Agreement => a !== null)
    .map((a) => [
      a.what,
      String(a.n),
      pct1(a.observedAgreement),
      a.kappa === null ? "undefined" : a.kappa.toFixed(3),
      a.se === null ? "-" : a.se.toFixed(3),
      a.note,
    ]);
}

export const downstream: ReportSection = (input, a) => {
  const out: string[] = ["## Base vs adapter on the test split", ""];
  const ev = input.evalLog;
  if (!ev) {
    out.push(`_No eval yet: \`agent eval ${input.runId}\`._`, "");
    return out;
  }
  out.push(
    `Task set \`${ev.taskSet.path}\` (sha256 \`${ev.taskSet.sha256.slice(0, 12)}…\`), split \`${ev.taskSet.split}\`, **N = ${ev.taskSet.n} tasks**, ` +
      `${ev.settings.samplesPerTask} sample(s) per task, temperature ${ev.settings.temperature}, max_new_tokens ${ev.settings.maxNewTokens}, seed ${ev.settings.seed}; ` +
      `model ${ev.model.requested || "(embedded default)"} -> \`${ev.model.resolved}\`; evaluated ${ev.date}.`,
  );
  out.push("");
  if (olderLogNote(ev)) out.push(`_Note: ${olderLogNote(ev)}._`, "");
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
  if (c?.paired && c.bootstrap)
    out.push(...comparisonTable(c, a.baseSource, a.downstream?.pPassAtThreshold ?? null, a.downstream?.pConfirmAtThreshold ?? null, a.downstream?.powerMethod));
  else out.push(`_No paired comparison: ${c ? c.requiredNNote : "the eval has no base or no adapter variant"}._`);
  out.push("");
  out.push(...fingerprintSection(a));
  out.push(...splitsSection(ev, a.splits));
  out.push("### Grader agreement (Cohen's kappa)");
  out.push("");
  // a grader is never compared with itself (an older log may hold "X vs X")
  const graderKappas = ev.variants.map((v) => v.graderAgreement).filter((g): g is Agreement => g !== null && !selfComparison(g.what));
  const kappas = agreementRows([...graderKappas, ...ev.humanAgreement]);
  if (graderKappas.length === 0) {
    const primary = ev.settings.graders[0]?.name ?? "the primary grader";
    out.push(
      `_No second grader: ${primary} is the only answer grader this task set names (its metadata's \`graders\`), so there is no grader agreement to report; ` +
        "a grader compared with itself agrees by construction. Name a second answer grader there (e.g. exact_match) for a kappa._",
    );
    if (kappas.length) out.push("");
  }
  if (kappas.length) out.push(table(["raters", "items", "raw agreement", "kappa", "SE", "note"], kappas));
  else if (graderKappas.length) out.push("_No graded items._");
  if (ev.humanAgreement.length === 0) {
    out.push("");
    out.push("No `human_label` in the task file: agreement with human labels is pending.");
  }
  out.push("");
  return out;
};

/** The judged comparison's statistics, the decision interval and governing test first. */
function comparisonTable(c: Comparison, baseSource: string, pPass: number | null, pConfirm: number | null, powerMethod: string | undefined): string[] {
  const p = c.paired!;
  const out: string[] = [`Paired by task id, adapter - base, base scores from ${baseSource}:`, ""];
  const dec = c.decision;
  const rows: string[][] = [
    ["pairs (n)", `${c.n}${c.unpaired ? ` (${c.unpaired} unpaired task(s) left out)` : ""}`],
    ["mean difference", `${pp(p.meanDiff)} (${f3(p.meanA)} -> ${f3(p.meanB)})`],
  ];
  if (dec) {
    rows.push([`**95% CI, ${dec.method} (the decision interval)**`, `**${decisionInterval(dec)}**`]);
    rows.push([
      `**governing test: ${dec.test}**`,
      dec.p === null
        ? dec.test === UNDEFINED_TEST
          ? "p undefined: every difference is 0"
          : dec.rejects
            ? "rejects 0 (alpha .05)"
            : "does not reject 0 (alpha .05)"
        : `p = ${dec.p.toPrecision(3)}: ${dec.rejects ? "rejects" : "does not reject"} 0 (alpha .05)`,
    ]);
  }
  // The bootstrap's Monte Carlo error on a 2.5% quantile is ~sqrt(q(1-q)/R)/f(x): about 0.1 pp here,
  // so it is shown to 0.1 pp and never decides.
  rows.push(["95% CI, " + CI_METHOD + " (shown, does not decide)", `${pp(c.bootstrap!.lower)} to ${pp(c.bootstrap!.upper)}`]);
  rows.push(["95% CI, paired t", `${pp(p.ciT.lower)} to ${pp(p.ciT.upper)}`]);
  rows.push(["sd of differences / SE", `${f3(p.sdDiff)} / ${f3(p.seDiff)} (fractions)`]);
  if (p.discordant && p.mcnemarP !== null) {
    rows.push(["discordant pairs", `base right & adapter wrong ${p.discordant.b}, base wrong & adapter right ${p.discordant.c}`]);
    rows.push(["exact McNemar p (two-sided)", p.mcnemarP.toPrecision(3)]);
  }
  rows.push([
    "required n for the observed delta (alpha .05 two-sided, power .8)",
    c.requiredN === null ? `- (${c.requiredNNote})` : `${c.requiredN}${c.requiredNNote ? ` (${c.requiredNNote})` : ""}`,
  ]);
  rows.push([`minimum detectable effect at n=${c.n}`, c.mde === null ? "- (the differences have no spread)" : pp(c.mde).replace("+", "")]);
  if (c.clustered) {
    rows.push([
      `sensitivity: SE clustered by ${c.clustered.clusteredBy} (${c.clustered.clusters} clusters, CR1)`,
      `${f3(c.clustered.se)} vs ${f3(c.clustered.iidSe)} unclustered (design effect ${c.clustered.designEffect === null ? "-" : c.clustered.designEffect.toFixed(2)}); ` +
        `95% CI ${pp(c.clustered.lower)} to ${pp(c.clustered.upper)}`,
    ]);
  }
  if (p.sdDiff > 0 && pPass !== null && pConfirm !== null) {
    rows.push([
      `P(PASS) / P(CONFIRMED) if the true delta were +${DOWNSTREAM_MIN_DELTA_PP} pp, at n=${c.n} (${powerMethod === "simulated" ? `simulated: ${GATE_SIMULATION_DRAWS} draws of the Tango + exact McNemar gate at this eval's discordance, seed ${GATE_SIMULATION_SEED}, MC SE <= ${(0.5 / Math.sqrt(GATE_SIMULATION_DRAWS)).toFixed(3)}` : "normal approximation"})`,
      `${pPass.toFixed(2)} / ${pConfirm.toFixed(2)}`,
    ]);
  }
  out.push(table(["statistic", "value"], rows));
  out.push("");
  out.push("Formulas: n = ((z_{a/2} + z_b) * sd_d / |delta|)^2 and MDE = (z_{a/2} + z_b) * sd_d / sqrt(n), with z_{a/2} = 1.96, z_b = 0.84.");
  return out;
}
