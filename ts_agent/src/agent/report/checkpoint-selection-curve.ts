/** selection-curve.svg: the validation curve `agent select` chose on (each checkpoint's
 *  validation accuracy with its 95% CI against the step, the base at step 0, the chosen one
 *  filled red). Written by `agent select` next to selection.json; the report links it. */
import type { SelectionRecord } from "../verdict/checkpoint-selection-rule.js";

export const SELECTION_SVG = "selection-curve.svg";

/** A 640x360 SVG of the record's curve (pure). */
export function selectionSvg(sel: Pick<SelectionRecord, "runId" | "curve" | "chosenStep" | "validation">): string {
  const [W, H, L, R, T, B] = [640, 360, 56, 150, 24, 44];
  const maxStep = Math.max(1, ...sel.curve.map((p) => p.step));
  const x = (s: number) => L + (s / maxStep) * (W - L - R);
  const y = (v: number) => T + (1 - v) * (H - T - B);
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${L}" y="14" font-size="12">${esc(`${sel.runId}: validation exact match per checkpoint (${sel.validation.n} train-split rows, 95% CI)`)}</text>`,
  ];
  for (let k = 0; k <= 5; k++) {
    const v = k / 5;
    out.push(
      `<line x1="${L}" x2="${W - R}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/>`,
      `<text x="${L - 6}" y="${y(v) + 4}" text-anchor="end">${v.toFixed(1)}</text>`,
    );
  }
  out.push(`<text x="${(L + W - R) / 2}" y="${H - 8}" text-anchor="middle">step</text>`);
  const pts = [
    ...(sel.validation.base ? [{ step: 0, a: sel.validation.base, base: true }] : []),
    ...sel.curve.filter((p) => p.accuracy).map((p) => ({ step: p.step, a: p.accuracy!, base: false })),
  ];
  out.push(
    `<polyline fill="none" stroke="#1b9e77" stroke-width="2" points="${pts
      .filter((p) => !p.base)
      .map((p) => `${x(p.step).toFixed(1)},${y(p.a.estimate).toFixed(1)}`)
      .join(" ")}"/>`,
  );
  for (const p of pts) {
    const chosen = !p.base && p.step === sel.chosenStep;
    const color = p.base ? "#999" : chosen ? "#d62728" : "#1b9e77";
    out.push(
      `<line x1="${x(p.step).toFixed(1)}" x2="${x(p.step).toFixed(1)}" y1="${y(p.a.lower).toFixed(1)}" y2="${y(p.a.upper).toFixed(1)}" stroke="${color}"/>`,
      `<circle cx="${x(p.step).toFixed(1)}" cy="${y(p.a.estimate).toFixed(1)}" r="${chosen ? 5 : 3.5}" fill="${color}"/>`,
      `<text x="${x(p.step).toFixed(1)}" y="${H - B + 16}" text-anchor="middle">${p.step}</text>`,
    );
  }
  out.push(
    `<text x="${W - R + 8}" y="${T + 14}" fill="#1b9e77">checkpoints</text>`,
    `<text x="${W - R + 8}" y="${T + 28}" fill="#d62728">chosen: step ${sel.chosenStep}</text>`,
    `<text x="${W - R + 8}" y="${T + 42}" fill="#999">step 0: the base</text>`,
    "</svg>",
  );
  return out.join("\n") + "\n";
}
