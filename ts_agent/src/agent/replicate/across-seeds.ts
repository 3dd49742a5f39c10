/**
 * A recipe judged over training seeds (`agent sweep`): one TrainRequest trained under N seeds,
 * submitted together to one sidecar (its slots decide how many train at once), each evaluated on
 * the same tasks and judged by the same milestone rules. A single
 * run's verdict is one draw of the training randomness (the seed, and the floating-point order of
 * the machine it ran on); the recipe's effect is the distribution of those draws.
 *
 * What this file owns: the per-seed record (`SeedRun`), the summary over seeds (`summarizeSweep`:
 * mean and per-seed downstream delta, between-seed SD, an interval over seeds from
 * stats.intervalOverRuns with its method named, the share of seeds that PASS with a Wilson
 * interval, the run shown in detail, where the seeds ran: `placementOf`) and its Markdown (`renderSweepReport`). Pure: the command
 * (pipeline/seed-sweep.ts) does the training, the I/O and the per-run reports.
 *
 * Units: deltas and relative changes are FRACTIONS here and percentage points / percent in text.
 */
import { intervalOverRuns, wilsonInterval, type ProportionInterval, type RunsInterval } from "../core/stats/index.js";
import { pct, pp, type Verdict } from "../verdict/milestone.js";

export const SWEEP_FILE = "sweep.json";
export const SWEEP_REPORT = "report.md";
export const SWEEPS_DIR = "sweeps";

/** One paired comparison's headline: delta and its decision interval, all fractions. */
export interface DeltaLine {
  n: number;
  delta: number;
  ciLow: number;
  ciHigh: number;
  method: string;
}

/** One seed of a sweep: its run, held-out reward, downstream deltas and verdict. */
export interface SeedRun {
  seed: number;
  runId: string;
  /** terminal state name (SUCCEEDED, FAILED, ...) */
  state: string;
  heldOut: { start: number; end: number; relativeChange: number; ciLow: number; ciHigh: number } | null;
  /** adapter - base on the test split (the milestone's downstream criterion) */
  downstream: DeltaLine | null;
  /** adapter - base on the held-out-template split, when the task set has one */
  heldOutTemplate: DeltaLine | null;
  verdict: Verdict;
  rewardVerdict: Verdict;
  downstreamVerdict: Verdict;
  /** the run's own training seconds (summary.json train_seconds) */
  trainSeconds: number;
  /** train + download + eval + report, seconds */
  wallSeconds: number;
  /** runs/<run_id>/report.md relative to the evals dir */
  report: string;
  /** where and when it trained (absent in a sweep.json written before sweeps ran seeds at once) */
  placement?: SeedPlacement;
}

/** Where a seed's run trained: the sidecar's Run.slots / Run.node seen while it was RUNNING, and
 *  its RUNNING interval (Run.start_time / end_time, epoch ms; null when it never ran). */
export interface SeedPlacement {
  slots: number[];
  node: string;
  startMs: number | null;
  endMs: number | null;
}

/** How a sweep's seeds were placed: how many it let wait or train on the sidecar at once, and
 *  how many RUNNING intervals did overlap at most (>= 2: seeds trained concurrently). */
export interface SweepPlacement {
  inFlight: number;
  maxOverlap: number;
  concurrent: boolean;
}

export interface SweepSummary {
  sweepId: string;
  /** where the request came from (a file path, or "the default demo request") */
  request: string;
  seeds: SeedRun[];
  /** seeds whose verdict is PASS or CONFIRMED (both criteria) */
  passed: number;
  passShare: ProportionInterval | null;
  /** downstream delta over the seeds that have one */
  delta: RunsInterval | null;
  /** held-out relative reward change over the seeds that have one */
  relativeChange: RunsInterval | null;
  /** the seed whose run report is the one shown in detail: the median downstream delta */
  detailRunId: string;
  medianWallSeconds: number;
  maxWallSeconds: number;
  /** absent in a sweep.json written before sweeps ran seeds at once */
  placement?: SweepPlacement;
}

export function passedBoth(v: Verdict): boolean {
  return v === "PASS" || v === "CONFIRMED";
}

function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** The run with the median downstream delta (lower median for even n; ties to the first seed). */
function detailRun(seeds: SeedRun[]): string {
  const withDelta = seeds.filter((s) => s.downstream && Number.isFinite(s.downstream.delta));
  if (withDelta.length === 0) return seeds[0]?.runId ?? "";
  const sorted = [...withDelta].sort((a, b) => a.downstream!.delta - b.downstream!.delta || a.seed - b.seed);
  return sorted[Math.floor((sorted.length - 1) / 2)].runId;
}

/** The most RUNNING intervals that hold one instant (intervals touching end-to-start do not overlap). */
export function maxOverlap(intervals: Array<{ startMs: number | null; endMs: number | null }>): number {
  const points: Array<[number, number]> = [];
  for (const i of intervals) {
    if (i.startMs === null || i.endMs === null || !(i.endMs > i.startMs)) continue;
    points.push([i.startMs, 1], [i.endMs, -1]);
  }
  points.sort((a, b) => a[0] - b[0] || a[1] - b[1]); // an end before a start at the same instant
  let now = 0;
  let most = 0;
  for (const [, d] of points) most = Math.max(most, (now += d));
  return most;
}

export function placementOf(seeds: SeedRun[], inFlight: number): SweepPlacement {
  const most = maxOverlap(seeds.map((s) => s.placement ?? { startMs: null, endMs: null }));
  return { inFlight, maxOverlap: most, concurrent: most >= 2 };
}

export function summarizeSweep(sweepId: string, request: string, seeds: SeedRun[], inFlight = 1): SweepSummary {
  const deltas = seeds.map((s) => s.downstream?.delta).filter((d): d is number => d !== undefined && Number.isFinite(d));
  const rel = seeds.map((s) => s.heldOut?.relativeChange).filter((d): d is number => d !== undefined && Number.isFinite(d));
  const passed = seeds.filter((s) => passedBoth(s.verdict)).length;
  const walls = seeds.map((s) => s.wallSeconds);
  return {
    sweepId,
    request,
    seeds,
    passed,
    passShare: seeds.length ? wilsonInterval(passed, seeds.length) : null,
    delta: deltas.length ? intervalOverRuns(deltas) : null,
    relativeChange: rel.length ? intervalOverRuns(rel) : null,
    detailRunId: detailRun(seeds),
    medianWallSeconds: median(walls),
    maxWallSeconds: walls.length ? Math.max(...walls) : NaN,
    placement: placementOf(seeds, inFlight),
  };
}

// ---------------------------------------------------------------------------------------------
// Rendering

/** milestone.ts's pp / pct, with "-" for a missing or non-finite value (a seed without an eval). */
function ppText(x: number | undefined): string {
  return x === undefined || !Number.isFinite(x) ? "-" : pp(x);
}

function pctText(x: number | undefined): string {
  return x === undefined || !Number.isFinite(x) ? "-" : pct(x, 0);
}

function deltaCell(d: DeltaLine | null): string {
  return d ? `${ppText(d.delta)} (${ppText(d.ciLow)} to ${ppText(d.ciHigh)})` : "-";
}

/** One line: "k/N PASS both criteria (Wilson 95% CI a-b)". */
export function passLine(s: SweepSummary): string {
  if (!s.passShare) return "no seeds";
  const p = s.passShare;
  return `${s.passed}/${s.seeds.length} PASS both criteria (Wilson 95% CI ${p.lower.toFixed(2)}-${p.upper.toFixed(2)})`;
}

/** The across-seed effect in one sentence, with the interval's method named. */
export function effectLine(s: SweepSummary): string {
  const d = s.delta;
  if (!d) return "no seed has a downstream delta (no eval)";
  const sd = Number.isFinite(d.sd) ? `, between-seed SD ${(d.sd * 100).toFixed(1)} pp` : "";
  const ci = Number.isFinite(d.lower) ? ` (95% CI ${ppText(d.lower)} to ${ppText(d.upper)}, ${d.method})` : ` (${d.method})`;
  return `downstream adapter - base: mean ${ppText(d.mean)} over ${d.n} seed${d.n === 1 ? "" : "s"}${ci}${sd}`;
}

/** The "## Replicates" section: the table over seeds and the recipe's effect. */
/** Relative links from the file the section lands in: to the project's docs/ and the evals dir's runs/. */
export interface ReportLinks {
  docs: string;
  runs: string;
}

/** "slots 0,1" / "slots 1 on node 10.0.0.2 ab12" / "-": a seed's placement cell. */
export function placementCell(p: SeedPlacement | undefined): string {
  if (!p || (!p.slots.length && !p.node)) return "-";
  return [p.slots.length ? `slot${p.slots.length === 1 ? "" : "s"} ${p.slots.join(",")}` : "", p.node ? `on node ${p.node}` : ""].filter(Boolean).join(" ");
}

/** How the seeds ran, in one sentence: together (up to how many at once) or one after another. */
export function placementLine(s: SweepSummary): string {
  const p = s.placement;
  if (!p) return "one after another on the same sidecar";
  const asked = p.inFlight > 1 ? `submitted to one sidecar up to ${p.inFlight} at a time` : "submitted to one sidecar one at a time";
  const ran = p.concurrent
    ? `up to ${p.maxOverlap} trained at once (overlapping RUNNING intervals; the sidecar's slots admit them)`
    : "they trained one after another (no two RUNNING intervals overlap)";
  return `${asked}; ${ran}`;
}

export function renderReplicateSection(s: SweepSummary, links: ReportLinks): string {
  const out: string[] = [];
  out.push("## Replicates: the recipe over seeds", "");
  out.push(
    `One request trained under ${s.seeds.length} seed${s.seeds.length === 1 ? "" : "s"} (${s.seeds.map((x) => x.seed).join(", ")}), ` +
      `${placementLine(s)}, each evaluated on the same tasks and judged by the same rules ` +
      `([docs/verdict.md](${links.docs}/verdict.md)). Request: ${s.request}.`,
    "",
  );
  out.push(`- **${passLine(s)}**`);
  out.push(`- ${effectLine(s)}`);
  const r = s.relativeChange;
  if (r) {
    const ci = Number.isFinite(r.lower) ? ` (95% CI ${pctText(r.lower)} to ${pctText(r.upper)}, ${r.method})` : "";
    out.push(`- held-out reward relative change: mean ${pctText(r.mean)} over ${r.n} seeds${ci}`);
  }
  out.push(`- shown in detail: \`${s.detailRunId}\` (the median downstream delta): [its report](${links.runs}/${s.detailRunId}/report.md)`);
  out.push(
    `- wall time per seed (submitted to reported, queue wait included): median ${s.medianWallSeconds.toFixed(0)} s, max ${s.maxWallSeconds.toFixed(0)} s`,
    "",
  );
  out.push("| seed | run | held-out reward | relative change (95% CI) | downstream delta (decision CI) | held-out templates | verdict | train s | placement |");
  out.push("|---|---|---|---|---|---|---|---|---|");
  for (const x of s.seeds) {
    const h = x.heldOut;
    out.push(
      `| ${x.seed} | ${x.runId} | ${h ? `${h.start.toFixed(3)} -> ${h.end.toFixed(3)}` : "-"} | ` +
        `${h ? `${pctText(h.relativeChange)} (${pctText(h.ciLow)} to ${pctText(h.ciHigh)})` : "-"} | ${deltaCell(x.downstream)} | ` +
        `${deltaCell(x.heldOutTemplate)} | ${x.verdict}${x.state === "SUCCEEDED" ? "" : ` (${x.state})`} | ${x.trainSeconds.toFixed(0)} | ${placementCell(x.placement)} |`,
    );
  }
  out.push("");
  out.push(
    "Each seed is one draw of the training randomness; another machine's floating-point order is another draw. " +
      "The share of seeds that PASS is the recipe's replication rate on this machine; the interval over seeds is " +
      "about the recipe, the per-run CIs are about one adapter on these tasks.",
  );
  return out.join("\n") + "\n";
}

export function renderSweepReport(s: SweepSummary, links: ReportLinks): string {
  return `# Sweep ${s.sweepId}\n\n${renderReplicateSection(s, links)}`;
}
