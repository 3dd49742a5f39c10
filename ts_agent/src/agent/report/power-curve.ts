/**
 * The milestone's power curve: P(PASS) and P(CONFIRMED) of the downstream gates against the true
 * delta, for several test-set sizes, from stats.operatingCharacteristic (normal approximation,
 * the observed sd of the per-task differences). Written next to report.md as CSV (the data) and
 * as a small SVG line chart the report embeds (no plotting dependency on the TS side;
 * scripts/plot_power.py draws the same CSV with matplotlib for anyone who prefers a PNG).
 */
import { operatingCharacteristic } from "../core/stats/index.js";

export const POWER_CSV = "power-curve.csv";
export const POWER_SVG = "power-curve.svg";

export interface PowerPoint {
  n: number;
  /** true delta, fraction */
  trueDelta: number;
  pPass: number;
  pConfirm: number;
}

export interface PowerCurve {
  threshold: number;
  sdDiff: number;
  /** the eval's own n (one of `ns`) */
  currentN: number;
  ns: number[];
  points: PowerPoint[];
}

/** Test-set sizes on the curve: the current n and a doubling ladder around the milestone's 200. */
export function powerSizes(currentN: number): number[] {
  return [...new Set([currentN, 50, 100, 200, 400, 800, 1600])].sort((a, b) => a - b);
}

export function powerCurve(sdDiff: number, currentN: number, threshold: number): PowerCurve {
  const ns = powerSizes(currentN);
  const points: PowerPoint[] = [];
  for (const n of ns) {
    for (let k = -4; k <= 40; k++) {
      const trueDelta = k * 0.005; // -2 pp to +20 pp in 0.5 pp steps
      const oc = operatingCharacteristic(trueDelta, sdDiff, n, { threshold });
      points.push({ n, trueDelta, pPass: oc.pPass, pConfirm: oc.pConfirm });
    }
  }
  return { threshold, sdDiff, currentN, ns, points };
}

export function powerCsv(c: PowerCurve): string {
  const lines = ["n,true_delta_pp,p_pass,p_confirm,is_current_n"];
  for (const p of c.points) {
    lines.push(`${p.n},${(p.trueDelta * 100).toFixed(1)},${p.pPass.toFixed(6)},${p.pConfirm.toFixed(6)},${p.n === c.currentN ? 1 : 0}`);
  }
  return lines.join("\n") + "\n";
}

/** A 640x360 SVG: one P(PASS) line per n (the current n bold), the threshold and P = 0.8 dashed. */
export function powerSvg(c: PowerCurve): string {
  const W = 640;
  const H = 360;
  const L = 56;
  const R = 120;
  const T = 24;
  const B = 44;
  const x = (d: number) => L + ((d * 100 + 2) / 22) * (W - L - R);
  const y = (p: number) => T + (1 - p) * (H - T - B);
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${L}" y="14" font-size="12">P(PASS) vs true delta (sd of differences ${c.sdDiff.toFixed(3)}; normal approximation)</text>`);
  for (let k = 0; k <= 5; k++) {
    const p = k / 5;
    out.push(`<line x1="${L}" x2="${W - R}" y1="${y(p)}" y2="${y(p)}" stroke="#eee"/>`);
    out.push(`<text x="${L - 6}" y="${y(p) + 4}" text-anchor="end">${p.toFixed(1)}</text>`);
  }
  for (let d = -2; d <= 20; d += 2) {
    out.push(`<text x="${x(d / 100)}" y="${H - B + 16}" text-anchor="middle">${d}</text>`);
  }
  out.push(`<text x="${(L + W - R) / 2}" y="${H - 8}" text-anchor="middle">true delta (pp)</text>`);
  out.push(`<line x1="${x(c.threshold)}" x2="${x(c.threshold)}" y1="${T}" y2="${H - B}" stroke="#999" stroke-dasharray="4 3"/>`);
  out.push(`<line x1="${L}" x2="${W - R}" y1="${y(0.8)}" y2="${y(0.8)}" stroke="#999" stroke-dasharray="4 3"/>`);
  const colors = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"];
  c.ns.forEach((n, i) => {
    const pts = c.points.filter((p) => p.n === n).map((p) => `${x(p.trueDelta).toFixed(1)},${y(p.pPass).toFixed(1)}`);
    const current = n === c.currentN;
    out.push(`<polyline fill="none" stroke="${colors[i % colors.length]}" stroke-width="${current ? 3 : 1.5}" points="${pts.join(" ")}"/>`);
    out.push(`<text x="${W - R + 8}" y="${T + 14 * (i + 1)}" fill="${colors[i % colors.length]}">n=${n}${current ? " (this eval)" : ""}</text>`);
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}
