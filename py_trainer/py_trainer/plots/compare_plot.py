"""The figure of `agent compare`'s compare.md: each pairwise comparison's mean difference with its
decision interval (a forest plot), Holm-adjusted rejections filled, the rest hollow."""

from __future__ import annotations

import io
import math
from pathlib import Path

from py_trainer.core.atomic import write_atomic


def write_compare_plot(path: Path, spec: dict) -> None:
    """`spec`: {"title": str, "unit": str, "rows": [{"label", "estimate", "lower", "upper",
    "rejects"}]} (fractions; drawn in percentage points). ValueError names what is wrong."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = spec.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ValueError('"rows" must be a non-empty list')
    for i, r in enumerate(rows):
        for key in ("estimate", "lower", "upper"):
            if not isinstance(r.get(key), (int, float)) or not math.isfinite(r[key]):
                raise ValueError(f"rows[{i}].{key} must be a finite number")
        if not isinstance(r.get("label"), str):
            raise ValueError(f"rows[{i}].label must be a string")
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.6), dpi=110)
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        est, lo, hi = (100 * r[k] for k in ("estimate", "lower", "upper"))
        ax.plot([lo, hi], [y, y], color="tab:blue", lw=2)
        ax.plot([est], [y], "o", color="tab:blue", mfc="tab:blue" if r.get("rejects") else "white", ms=8)
    ax.axvline(0, color="tab:gray", ls="--", lw=1)
    ax.set_yticks(ys, [r["label"] for r in rows])
    ax.set_xlabel(spec.get("unit") or "difference (percentage points), 95% decision interval")
    ax.set_title(spec.get("title") or "pairwise comparisons")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    write_atomic(Path(path), buf.getvalue())
