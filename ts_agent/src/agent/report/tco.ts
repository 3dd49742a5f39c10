/**
 * PPO vs GRPO total cost of ownership for this run's model: training-state memory from the real
 * parameter counts in run.json, plus the qualitative costs (critic, reward model, labels, knobs).
 *
 * Memory model (bytes; activations, KV cache and framework overhead are NOT counted):
 *   b      = bytes per weight/gradient at the run's precision (fp32 4, bf16 2, fp16 2)
 *   P      = base model parameters (run.json total_params, counted before LoRA is attached)
 *   L      = LoRA adapter parameters (run.json trainable_params)
 *   AdamW  = 2 fp32 states (m, v) per trainable parameter = 8 bytes each
 * A trained model:  weights + gradients (b per trainable param) + AdamW states (8 per trainable param)
 *   full FT:  P*b + P*b + 8*P            LoRA:  (P + L)*b + L*b + 8*L
 * A frozen model:   weights only, P*b.
 * Roles:
 *   policy      trained.
 *   reference   frozen copy for the KL penalty (only when beta > 0). With LoRA it costs nothing
 *               extra: the reference is the policy with the adapter disabled (TRL does this).
 *   critic      PPO only: a value model the size of the policy, trained alongside it (with LoRA:
 *               its own adapter on its own copy of the base).
 *   reward model PPO with a learned RM (RLHF): frozen, taken here as the size of the policy.
 *               GRPO here uses verifiable, programmatic rewards (the run's own): none.
 * Ranked-preference runs (DPO): the reference model is not optional (the implicit reward is
 * beta * log(pi / pi_ref)); with LoRA it is again the policy with the adapter disabled, with full
 * fine-tuning a frozen copy. Its RLHF alternative is PPO with a reward model trained on the same
 * rankings (`tcoMemoryPreference`).
 * Mixed-precision fp32 master weights (another 4 bytes per trainable param when b = 2) are not
 * included; the report says so.
 */
import type { Run } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { isPreferenceRun } from "./preference.js";

export type Precision = "fp32" | "bf16" | "fp16";

export const ADAMW_BYTES_PER_PARAM = 8; // two fp32 states (exp_avg, exp_avg_sq)

export function bytesPerParam(precision: Precision): number {
  return precision === "fp32" ? 4 : 2;
}

export interface TcoInput {
  /** base model parameters (before LoRA) */
  baseParams: number;
  /** LoRA adapter parameters (the trainable ones in this run) */
  loraParams: number;
  precision: Precision;
  /** KL coefficient; 0 = no reference model */
  beta: number;
}

export type Role = "policy" | "reference" | "critic" | "reward model";

export interface MemoryLine {
  role: Role;
  weights: number;
  gradients: number;
  optimizer: number;
  total: number;
  /** the arithmetic, with symbols */
  formula: string;
}

export interface MemoryConfig {
  name: string;
  algorithm: "GRPO" | "PPO" | "DPO";
  tuning: "LoRA" | "full";
  lines: MemoryLine[];
  total: number;
}

function line(role: Role, weights: number, gradients: number, optimizer: number, formula: string): MemoryLine {
  return { role, weights, gradients, optimizer, total: weights + gradients + optimizer, formula };
}

function trained(role: Role, t: TcoInput, tuning: "LoRA" | "full"): MemoryLine {
  const b = bytesPerParam(t.precision);
  const P = t.baseParams;
  const L = t.loraParams;
  if (tuning === "full") return line(role, P * b, P * b, ADAMW_BYTES_PER_PARAM * P, "P*b + P*b + 8*P");
  return line(role, (P + L) * b, L * b, ADAMW_BYTES_PER_PARAM * L, "(P+L)*b + L*b + 8*L");
}

function frozen(role: Role, t: TcoInput): MemoryLine {
  return line(role, t.baseParams * bytesPerParam(t.precision), 0, 0, "P*b");
}

/** Memory for GRPO and PPO, each with LoRA and with full fine-tuning. */
export function tcoMemory(t: TcoInput): MemoryConfig[] {
  const configs: MemoryConfig[] = [];
  for (const algorithm of ["GRPO", "PPO"] as const) {
    for (const tuning of ["LoRA", "full"] as const) {
      const lines: MemoryLine[] = [trained("policy", t, tuning)];
      if (t.beta > 0) {
        lines.push(tuning === "LoRA" ? line("reference", 0, 0, 0, "0 (adapter disabled)") : frozen("reference", t));
      }
      if (algorithm === "PPO") {
        lines.push(trained("critic", t, tuning));
        lines.push(frozen("reward model", t));
      }
      configs.push({
        name: `${algorithm} + ${tuning === "LoRA" ? "LoRA" : "full fine-tuning"}`,
        algorithm,
        tuning,
        lines,
        total: lines.reduce((s, l) => s + l.total, 0),
      });
    }
  }
  return configs;
}

/** Memory for a ranked-preference run: DPO (policy + reference, always) and PPO-RLHF (policy,
 *  reference, critic, reward model), each with LoRA and with full fine-tuning. */
export function tcoMemoryPreference(t: TcoInput): MemoryConfig[] {
  const configs: MemoryConfig[] = [];
  for (const algorithm of ["DPO", "PPO"] as const) {
    for (const tuning of ["LoRA", "full"] as const) {
      const lines: MemoryLine[] = [trained("policy", t, tuning)];
      lines.push(tuning === "LoRA" ? line("reference", 0, 0, 0, "0 (adapter disabled)") : frozen("reference", t));
      if (algorithm === "PPO") {
        lines.push(trained("critic", t, tuning));
        lines.push(frozen("reward model", t));
      }
      const name = `${algorithm === "PPO" ? "PPO (RLHF)" : "DPO"} + ${tuning === "LoRA" ? "LoRA" : "full fine-tuning"}`;
      configs.push({ name, algorithm, tuning, lines, total: lines.reduce((s, l) => s + l.total, 0) });
    }
  }
  return configs;
}

/** 1536 -> "1.50 KiB" (binary prefixes). */
export function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(2)} ${units[i]}`;
}

/** The qualitative PPO vs GRPO rows. */
export function tcoQualitative(rewardNames: ReadonlyArray<string>): ReadonlyArray<{ aspect: string; ppo: string; grpo: string }> {
  const rewards = rewardNames.length ? [...new Set(rewardNames)].join(" + ") : "as the run's request names them";
  return TCO_QUALITATIVE.map((q) => ({ ...q, grpo: q.grpo.replace(REWARDS_SLOT, rewards) }));
}

const REWARDS_SLOT = "{rewards}";

/** The qualitative rows; tcoQualitative fills in the run's own reward names. */
export const TCO_QUALITATIVE: ReadonlyArray<{ aspect: string; ppo: string; grpo: string }> = [
  {
    aspect: "critic network",
    ppo: "a value model as large as the policy, trained jointly; its errors bias the advantages (GAE)",
    grpo: "none: the baseline is the mean reward of the G completions of the same prompt",
  },
  {
    aspect: "reward model",
    ppo: "RLHF-style PPO trains a reward model on human preference pairs and keeps it in memory during training",
    grpo: "none here: verifiable programmatic rewards ({rewards}), identical in TS and Python",
  },
  {
    aspect: "labelling cost",
    ppo: "thousands of human preference comparisons to train the reward model, plus audits for reward hacking",
    grpo: "gold answers only (already in the task file); G samples per prompt cost compute, not labels",
  },
  {
    aspect: "tuning surface",
    ppo: "policy and critic learning rates, GAE gamma and lambda, value-loss coefficient, clip ranges (policy and value), KL coefficient, RM normalisation",
    grpo: "num_generations (G), beta, epsilon / epsilon_high, learning rate, loss_type, scale_rewards",
  },
];

// ---------------------------------------------------------------------------------------------
// The compute side: this run's measured step time (summary.json's time_breakdown)

/**
 * summary.json's `time_breakdown` (py_trainer/training/skeleton.py `StepTimer`): wall seconds summed over
 * every training step, per phase, in the order the sidecar writes them (its `STEP_PHASES`, the one
 * list of phases: generation, scoring, rollout_logprobs = the old / reference policy forwards
 * before the loss, forward = the loss forward, backward, optimizer, other = the rest of a step,
 * between_steps = logging, events, checkpoints).
 */
export interface StepTimeBreakdown {
  steps: number;
  totals: Record<string, number>;
}

/** The time_breakdown object as summary.json writes it (snake_case), or null when absent or malformed. */
export function parseStepTimeBreakdown(json: unknown): StepTimeBreakdown | null {
  if (typeof json !== "object" || json === null) return null;
  const o = json as { steps?: unknown; step_seconds_total?: unknown };
  if (typeof o.steps !== "number" || o.steps < 1 || typeof o.step_seconds_total !== "object" || o.step_seconds_total === null) return null;
  const totals: Record<string, number> = {};
  for (const [p, v] of Object.entries(o.step_seconds_total as Record<string, unknown>)) {
    if (typeof v === "number" && Number.isFinite(v)) totals[p] = v;
  }
  return { steps: o.steps, totals };
}

export interface ComputeSide {
  /** mean seconds per step and share of the step, per measured phase */
  phases: Array<{ phase: string; seconds: number; share: number }>;
  stepSeconds: number;
  generationShare: number;
  /**
   * What a PPO critic would add per step, estimated from the same breakdown: a value model the
   * policy's size run on the same tokens. Its forward + backward in the update = the policy's
   * measured forward + backward (a lower bound: a full-parameter critic's backward also computes
   * weight gradients, LoRA's only the adapter's), plus its value forward on the rollout = one more
   * forward.
   */
  criticSeconds: number;
  criticShare: number;
}

/** Mean per-step seconds and shares from a breakdown, and the critic estimate beside generation. */
export function computeSide(b: StepTimeBreakdown): ComputeSide {
  const phases = Object.keys(b.totals);
  const total = phases.reduce((s, p) => s + b.totals[p], 0);
  const per = (p: string) => (b.totals[p] ?? 0) / b.steps;
  const stepSeconds = total / b.steps;
  const share = (x: number) => (stepSeconds > 0 ? x / stepSeconds : 0);
  const criticSeconds = 2 * per("forward") + per("backward");
  return {
    phases: phases.map((p) => ({ phase: p, seconds: per(p), share: share(per(p)) })),
    stepSeconds,
    generationShare: share(per("generation")),
    criticSeconds,
    criticShare: share(criticSeconds),
  };
}

/** The TCO section's input: this run's parameter counts, precision and beta; null without counts. */
export interface TcoFor {
  input: TcoInput;
  precisionNote: string;
  configs: MemoryConfig[];
}

/** The TCO inputs of a run (run.json's parameter counts and request); null when it has none. */
export function tcoFor(run: Run | null): TcoFor | null {
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
