/**
 * The one live progress line `agent train`, `agent watch`, `agent resume` and `agent demo` print
 * (a task file's run or an agent task's: an agent run's line adds what its episodes did), its
 * clock and ETA from the events' own timestamps, and the held-out change line at the end.
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";

import type { RunEvent, RunResult } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunState } from "../../sidecar/client.js";
import { pairedBootstrapCI } from "../core/stats/index.js";

/** "m:ss" (or "h:mm:ss"). */
export function clock(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}

/** The metrics the line shows: GRPO's reward and KL, or (no reward logged) the ranked-preference
 *  mode's held-out pairwise accuracy, margin and DPO loss: never "reward nan kl nan". */
export function lineMetrics(metrics: Record<string, number>): Array<[string, number]> {
  if (!("reward" in metrics) && "heldout/pairwise_accuracy" in metrics) {
    return [
      ["heldout/pairwise_accuracy", 3],
      ["rewards/margins", 3],
      ["loss", 4],
    ];
  }
  // a warm start (SFT): its loss on the assistant's tokens and TRL's token accuracy
  if (!("reward" in metrics) && "mean_token_accuracy" in metrics)
    return [
      ["loss", 4],
      ["mean_token_accuracy", 3],
    ];
  // an agent run (docs/agents.md): what its episodes did this step beside the reward
  if ("episodes/turns" in metrics) {
    return [
      ["reward", 3],
      ["kl", 4],
      ["episodes/turns", 2],
      ["tools/call_frequency", 2],
      ["tools/failure_frequency", 2],
      ["episodes/limit_hit", 2],
    ];
  }
  return [
    ["reward", 3],
    ["kl", 4],
  ];
}

/** The progress line's words for a metric ("tools/call_frequency" -> "tool calls/episode"). */
const METRIC_WORDS: Record<string, string> = {
  "episodes/turns": "turns/episode",
  "tools/call_frequency": "tool calls/episode",
  "tools/failure_frequency": "tool errors/call",
  "episodes/limit_hit": "limits hit",
};

/** Render one progress line: "step 3/30 reward 0.125 kl 0.0012 elapsed 0:05 ETA 0:41". */
export function progressLine(step: number, maxSteps: number, metrics: Record<string, number>, elapsedS: number, etaS: number | undefined): string {
  const fmt = (x: number | undefined, d: number) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(d));
  const shown = lineMetrics(metrics)
    .map(([k, d]) => `${METRIC_WORDS[k] ?? k} ${fmt(metrics[k], d)}`)
    .join(" ");
  return `step ${step}/${maxSteps} ${shown} elapsed ${clock(elapsedS)} ETA ${etaS === undefined ? "-:--" : clock(etaS)}`;
}

/** Elapsed time and ETA of a run from its events' timestamps. */
export class RunClock {
  private start?: number;
  private anchor?: { step: number; t: number };
  /** ms the run was down: from an end (CANCELLED, FAILED) to the RUNNING of its resume */
  private down = 0;
  private endedAt?: number;

  /** Feed every event; returns the line for a train step. */
  line(ev: RunEvent): string | undefined {
    const t = ev.time ? timestampMs(ev.time) : Date.now();
    if (ev.kind.case === "stateChange") {
      const st = ev.kind.value.state;
      if (st === RunState.RUNNING && this.start === undefined) this.start = t;
      else if (st === RunState.RUNNING && this.endedAt !== undefined) {
        // a resume: the time it was down is neither elapsed nor a step's time, and the resumed
        // run loads its model again before its first step, so the ETA re-anchors there
        this.down += t - this.endedAt;
        this.endedAt = undefined;
        this.anchor = undefined;
      } else if (st === RunState.CANCELLED || st === RunState.FAILED) this.endedAt = t;
    }
    this.start ??= t;
    if (ev.kind.case !== "trainStep") return undefined;
    const step = Number(ev.kind.value.step);
    const max = Number(ev.kind.value.maxSteps);
    if (step > 0 && !this.anchor) this.anchor = { step, t };
    let eta: number | undefined;
    if (step >= max) eta = 0;
    else if (this.anchor && step > this.anchor.step) eta = ((t - this.anchor.t) / 1000 / (step - this.anchor.step)) * (max - step);
    return progressLine(step, max, ev.kind.value.metrics, (t - this.start - this.down) / 1000, eta);
  }
}

/** Where a step line belongs, so an off-TTY printer can thin them out. */
export interface StepInfo {
  step: number;
  maxSteps: number;
}

/** trainViaSidecar's and watchViaSidecar's sink: a line; `final` = its own line (state, warning). */
export type TrainLog = (line: string, final?: boolean, step?: StepInfo) => void;

/** A terminal sink for trainViaSidecar's log lines. */
export interface TrainProgressPrinter {
  /** pass as trainViaSidecar's `log` */
  log: TrainLog;
  /** end the live line once the run is over */
  end: () => void;
}

/**
 * The live training line on stdout. On a TTY the step line is rewritten in place and a final line
 * (state change, warning) goes on its own line below it. Off a TTY (a log file, CI) every final
 * line is printed, and a step line at most every `everySeconds` (10 s), plus, when `stepsOffTty`
 * (train, watch: yes; demo keeps its log to the milestones and this heartbeat), every
 * `everySteps` steps (default a tenth of the run) and the first and last step.
 */
export function trainProgressPrinter(opts: { stepsOffTty?: boolean; everySteps?: number; everySeconds?: number } = {}): TrainProgressPrinter {
  const tty = process.stdout.isTTY;
  const everyMs = (opts.everySeconds ?? 10) * 1000;
  let shownAt = -Infinity;
  let live = false;
  return {
    log: (line, final, step) => {
      if (final) {
        process.stdout.write(`${live ? "\n" : ""}${line}\n`);
        live = false;
        return;
      }
      if (tty) {
        process.stdout.write(`\r${line.padEnd(78)}`);
        live = true;
        return;
      }
      const now = Date.now();
      const n = opts.everySteps ?? Math.max(1, Math.round((step?.maxSteps ?? 10) / 10));
      const byStep = opts.stepsOffTty && step !== undefined && (step.step % n === 0 || shownAt === -Infinity);
      const last = step !== undefined && step.step >= step.maxSteps;
      if (byStep || last || now - shownAt >= everyMs) {
        process.stdout.write(`${line}\n`);
        shownAt = now;
      }
    },
    end: () => {
      if (live) process.stdout.write("\n");
      live = false;
    },
  };
}

/** "+12.3%, 95% CI 4.5% to 20.1%": the held-out reward's relative change, step 0 -> end. */
export function relativeChangeText(r: RunResult): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  // a step-0 mean of 0 has no relative change (the milestone says the same: docs/verdict.md)
  if (!Number.isFinite(r.relativeChange)) return `relative change undefined: the step-0 mean is ${(r.startReward?.mean ?? NaN).toFixed(3)}`;
  return `${pct(r.relativeChange)}, 95% CI ${pct(r.relativeChangeCiLow)} to ${pct(r.relativeChangeCiHigh)}`;
}

/** A ranked-preference run's result: its held-out "reward" is pairwise accuracy (0.5 at step 0 by
 *  construction), so a ratio to step 0 means nothing; GRPO results carry no preference metrics. */
export function isPreferenceResult(r: RunResult): boolean {
  return r.preferenceMetrics !== undefined;
}

/**
 * The outcome's held-out line: "held-out reward: step 0 0.250 -> step 30 0.400 (+60.0%, 95% CI ...)"
 * for GRPO; "held-out pairwise accuracy: step 0 0.500 -> step 40 0.625 (+0.125, paired 95% CI
 * ... over 16 groups)" for ranked preference (the change, paired percentile bootstrap over groups,
 * 2000 resamples, seed 0: the interval report.md prints). undefined without both measurements.
 */
export function heldOutChangeLine(r: RunResult): string | undefined {
  const s = r.startReward;
  const e = r.endReward;
  if (!s || !e) return undefined;
  const ends = `step ${s.step} ${s.mean.toFixed(3)} -> step ${e.step} ${e.mean.toFixed(3)}`;
  if (!isPreferenceResult(r)) return `held-out reward: ${ends} (${relativeChangeText(r)})`;
  const change = e.mean - s.mean;
  const paired = s.perPrompt.length === e.perPrompt.length && s.perPrompt.length >= 2 && [...s.perPrompt, ...e.perPrompt].every(Number.isFinite);
  const ci = paired ? pairedBootstrapCI([...s.perPrompt], [...e.perPrompt], { resamples: 2000, seed: 0 }) : null;
  const sign = (x: number) => `${x >= 0 ? "+" : ""}${x.toFixed(3)}`;
  return (
    `held-out pairwise accuracy: ${ends} (${sign(change)}` +
    (ci ? `, paired 95% CI ${sign(ci.lower)} to ${sign(ci.upper)}` : "") +
    ` over ${e.numPrompts} groups; 0.5 at step 0 by construction)`
  );
}
