/** Replicates: when this run is a seed of a sweep (`agent sweep`), the recipe's effect across its
 *  seeds (agent/replicate/across-seeds.ts renders the section; the sweep's own report.md has the same). */
import { renderReplicateSection } from "../../replicate/across-seeds.js";
import type { ReportSection } from "../analysis.js";

export const replicates: ReportSection = (input) => {
  const sw = input.sweep;
  if (!sw) return [];
  // links from runs/<run_id>/report.md: the other runs are siblings
  return [renderReplicateSection(sw.summary, { docs: input.docsDir ?? "docs", runs: ".." }), ""];
};
