"""Draw a run's power curve as a PNG from the CSV `agent report` writes next to report.md.

    .venv/bin/python scripts/plot_power.py agent-evals/runs/<run_id>/power-curve.csv [OUT.png]

The CSV (ts_agent/src/agent/report/power-curve.ts) holds, for several test-set sizes n, P(PASS) and
P(CONFIRMED) of the milestone's downstream gates against the true delta (normal approximation,
the run's observed sd of per-task differences). The report already embeds the same curve as an
SVG drawn in TS; this script is for a matplotlib PNG (default OUT: power-curve.png beside the CSV).
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    src = Path(argv[0])
    out = Path(argv[1]) if len(argv) == 2 else src.with_suffix(".png")
    curves: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    current = None
    with src.open(newline="") as f:
        for row in csv.DictReader(f):
            n = int(row["n"])
            curves[n].append((float(row["true_delta_pp"]), float(row["p_pass"]), float(row["p_confirm"])))
            if row["is_current_n"] == "1":
                current = n
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for n in sorted(curves):
        pts = sorted(curves[n])
        lw = 2.5 if n == current else 1.2
        (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=lw, label=f"n={n}" + (" (this eval)" if n == current else ""))
        if n == current:
            ax.plot([p[0] for p in pts], [p[2] for p in pts], lw=1.2, ls=":", color=line.get_color(), label=f"n={n}: P(CONFIRMED)")
    ax.axvline(5, color="grey", ls="--", lw=0.8)
    ax.axhline(0.8, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("true delta (pp)")
    ax.set_ylabel("P(PASS)")
    ax.set_ylim(0, 1)
    ax.set_title("Milestone downstream gate: P(PASS) vs true delta")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
