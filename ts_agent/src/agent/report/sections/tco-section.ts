/** PPO vs GRPO (or PPO vs DPO): the memory of each setup for this model, the compute this run
 *  measured by phase with a critic's estimated cost beside it, and the qualitative table
 *  (numbers: ../tco.ts). */
import type { ReportSection } from "../analysis.js";
import { SIDECAR_DEFAULT_REWARDS } from "./overview-section.js";
import { table } from "../markdown.js";
import { bytesPerParam, tcoQualitative, formatBytes, type ComputeSide } from "../tco.js";

export const tco: ReportSection = (input, a) => {
  const out: string[] = [a.preference ? "## PPO (RLHF) vs DPO: total cost of ownership" : "## PPO vs GRPO: total cost of ownership", ""];
  if (!a.tco) {
    out.push("_run.json has no parameter counts._", "");
    return out;
  }
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
  out.push(
    table(
      ["", "PPO", "GRPO (this project)"],
      tcoQualitative((input.run?.request?.rewards?.length ? input.run.request.rewards : SIDECAR_DEFAULT_REWARDS).map((r) => r.name)).map((q) => [
        q.aspect,
        q.ppo,
        q.grpo,
      ]),
    ),
  );
  out.push("");
  return out;
};

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
        [
          "PPO would add: a policy-sized critic's value forward on the rollout + forward and backward in the update (estimated: 2 x forward + backward as measured here)",
          c.criticSeconds.toFixed(4),
          `+${pct(c.criticShare)}`,
        ],
      ],
    ),
    "",
    "The critic estimate is a lower bound: a full-parameter critic's backward also computes weight gradients (this run's LoRA backward computes only the adapter's), " +
      "and its AdamW step covers every parameter. PPO with one rollout per prompt generates fewer completions per prompt than GRPO's G; per completion trained, generation costs the same.",
  ];
}
