/**
 * An in-process stand-in for `py-trainer plot confusion IN OUT`, for report tests that are not
 * about the figure (the real one starts Python and matplotlib: ~1.5 s per report, and a process,
 * which the unit tier may not start). It writes the 8-byte PNG signature.
 */
import { writeFileSync } from "node:fs";

import { confusionPlotter } from "../../src/agent/report/run-report.js";

const realPlotter = confusionPlotter.run;

/** Report figures from now on are the stub (the binary must still exist: $PY_TRAINER_BIN or the venv's). */
export function stubConfusionPlot(): void {
  confusionPlotter.run = (_bin, args) => {
    if (args.length !== 4 || args[0] !== "plot" || args[1] !== "confusion") {
      return { status: 2, stderr: "plot stub: only 'plot confusion IN OUT'" };
    }
    writeFileSync(args[3], Buffer.from("\x89PNG\r\n\x1a\n", "latin1"));
    return { status: 0, stderr: "" };
  };
}

/** `py-trainer plot confusion` in a process again (an e2e test of the real figure). */
export function realConfusionPlot(): void {
  confusionPlotter.run = realPlotter;
}
