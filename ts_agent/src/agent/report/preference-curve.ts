/**
 * A ranked-preference run's curve: held-out pairwise accuracy per logged step (the sidecar
 * measures it at step 0 and at every logging step, `heldout/pairwise_accuracy`) beside TRL's
 * training-batch `rewards/accuracies`, drawn as a small SVG next to report.md (a GRPO run's curve
 * is the sidecar's reward-vs-step.png; the preference mode draws none, its data is
 * preference-vs-step.csv). No plotting dependency on the TS side, as power-curve.ts.
 */
import type { StepMetrics } from "./curve-features.js";

export const PREFERENCE_SVG = "preference-vs-step.svg";
/** the sidecar's table of the same steps (train_preference.py) */
export const PREFERENCE_CSV = "preference-vs-step.csv";

export interface PreferencePoint {
  step: number;
  /** held-out pairwise accuracy at this step (NaN when not measured) */
  heldOut: number;
  /** TRL's rewards/accuracies on this step's training batch (NaN at step 0 and when not logged) */
  train: number;
}

/** The logged steps as curve points, in step order; [] when no step carries either metric. */
export function preferenceCurve(steps: ReadonlyArray<StepMetrics>): PreferencePoint[] {
  const num = (x: number | undefined) => (typeof x === "number" && Number.isFinite(x) ? x : Number.NaN);
  return steps
    .map((s) => ({ step: s.step, heldOut: num(s.metrics["heldout/pairwise_accuracy"]), train: num(s.metrics["rewards/accuracies"]) }))
    .filter((p) => Number.isFinite(p.heldOut) || Number.isFinite(p.train))
    .sort((a, b) => a.step - b.step);
}

/** A 640x360 SVG: held-out pairwise accuracy (bold) and the training batch's accuracy against the
 *  step, y from 0 to 1, the 0.5 chance line dashed. */
export function preferenceSvg(points: ReadonlyArray<PreferencePoint>, title: string): string {
  const W = 640;
  const H = 360;
  const L = 56;
  const R = 150;
  const T = 24;
  const B = 44;
  const maxStep = Math.max(1, ...points.map((p) => p.step));
  const x = (s: number) => L + (s / maxStep) * (W - L - R);
  const y = (v: number) => T + (1 - v) * (H - T - B);
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${L}" y="14" font-size="12">${esc(title)}</text>`);
  for (let k = 0; k <= 5; k++) {
    const v = k / 5;
    out.push(`<line x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/>`);
    out.push(`<text x="${L - 6}" y="${y(v) + 4}" text-anchor="end">${v.toFixed(1)}</text>`);
  }
  for (let k = 0; k <= 5; k++) {
    const s = Math.round((k / 5) * maxStep);
    out.push(`<text x="${x(s)}" y="${H - B + 16}" text-anchor="middle">${s}</text>`);
  }
  out.push(`<text x="${(L + W - R) / 2}" y="${H - 8}" text-anchor="middle">step</text>`);
  out.push(`<line x1="${L}" x2="${W - R}" y1="${y(0.5)}" y2="${y(0.5)}" stroke="#999" stroke-dasharray="4 3"/>`);
  const series: Array<[string, keyof PreferencePoint, string, number]> = [
    ["held-out pairwise accuracy", "heldOut", "#1b9e77", 3],
    ["train batch rewards/accuracies", "train", "#d95f02", 1.5],
  ];
  series.forEach(([label, key, color, width], i) => {
    const pts = points.filter((p) => Number.isFinite(p[key])).map((p) => `${x(p.step).toFixed(1)},${y(p[key]).toFixed(1)}`);
    if (pts.length === 0) return;
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="${width}" points="${pts.join(" ")}"/>`);
    out.push(`<text x="${W - R + 8}" y="${T + 14 * (i + 1)}" fill="${color}">${label}</text>`);
  });
  out.push(`<text x="${W - R + 8}" y="${T + 14 * 3}" fill="#999">0.5: chance / step 0</text>`);
  out.push("</svg>");
  return out.join("\n") + "\n";
}
