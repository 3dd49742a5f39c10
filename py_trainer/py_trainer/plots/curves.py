"""The curves of a run: the per-step CSV of either mode, and GRPO's ``reward-vs-step.png``.

The plot shows the per-step training reward (TRL's batch mean ``reward``), a smoothed line
(trailing moving average, window 5), the step-0 held-out reward as a horizontal baseline, the
end held-out reward at the last step annotated with its % over step-0, and KL on a second axis
(TRL logs ``kl`` only when beta > 0). Training-batch rewards are noisy and come from different
prompts every step; the start/end comparison uses the fixed held-out prompts.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from py_trainer.core.atomic import write_atomic

GRPO_CSV_COLUMNS = ("step", "reward", "reward_smoothed", "reward_std", "kl", "frac_reward_zero_std",
                    "frac_reward_zero_std_group", "completions/clipped_ratio", "completions/mean_length", "loss", "grad_norm",
                    "learning_rate", "entropy")
PREFERENCE_CSV_COLUMNS = ("step", "loss", "rewards/accuracies", "rewards/margins", "rewards/chosen",
                          "rewards/rejected", "logps/chosen", "logps/rejected", "heldout/pairwise_accuracy",
                          "heldout/group_win_rate", "heldout/win_margin", "heldout/preference_consistency",
                          "learning_rate", "grad_norm")
SMOOTH_WINDOW = 5


def smooth(values: list[float], window: int = SMOOTH_WINDOW) -> list[float]:
    """Trailing moving average over the last `window` finite values (NaN where none)."""
    out = []
    for i in range(len(values)):
        win = [v for v in values[max(0, i - window + 1): i + 1] if math.isfinite(v)]
        out.append(sum(win) / len(win) if win else math.nan)
    return out


def write_steps_csv(path: Path, steps: list[dict], columns: tuple[str, ...]) -> None:
    """One row per logged step, the given metric columns (empty = not logged); a
    ``reward_smoothed`` column is the trailing mean of ``reward`` (window `SMOOTH_WINDOW`)."""
    smoothed = smooth([s.get("reward", math.nan) for s in steps]) if "reward_smoothed" in columns else None
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for i, s in enumerate(steps):
        row = dict(s, reward_smoothed=smoothed[i]) if smoothed is not None else s
        w.writerow([_fmt(row.get(c, math.nan)) for c in columns])
    write_atomic(path, buf.getvalue())


def _fmt(x) -> str:
    if isinstance(x, int):
        return str(x)
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else repr(float(x))


def write_plot(path: Path, steps: list[dict], *, start_reward: float | None, end_reward: float | None,
               title: str) -> None:
    import matplotlib.pyplot as plt

    fig = reward_figure(steps, start_reward=start_reward, end_reward=end_reward, title=title)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    write_atomic(path, buf.getvalue())


def reward_figure(steps: list[dict], *, start_reward: float | None, end_reward: float | None, title: str):
    """The reward-vs-step figure: whole optimizer steps on x; the end's "+N% vs step 0" in the
    right margin on the side away from the end point, with an arrow to it (never on the curve)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    xs = [s["step"] for s in steps]
    rewards = [s.get("reward", math.nan) for s in steps]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.plot(xs, rewards, color="tab:blue", alpha=0.35, lw=1, label="reward (train batch)")
    ax.plot(xs, smooth(rewards), color="tab:blue", lw=2, label=f"reward, {SMOOTH_WINDOW}-step mean")
    if start_reward is not None and math.isfinite(start_reward):
        ax.axhline(start_reward, color="tab:gray", ls="--", lw=1.2, label=f"step-0 held-out reward {start_reward:.3f}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if end_reward is not None and math.isfinite(end_reward) and xs:
        label = f"end held-out reward {end_reward:.3f}"
        if start_reward:
            label += f" ({(end_reward - start_reward) / abs(start_reward) * 100:+.1f}% vs step 0)"
        ax.scatter([xs[-1]], [end_reward], color="tab:green", zorder=5, s=40, label=label)
        lo, hi = ax.get_ylim()
        upper = (end_reward - lo) / ((hi - lo) or 1) > 0.5
        ax.annotate(label.split(" (")[-1].rstrip(")") if start_reward else f"{end_reward:.3f}",
                    (xs[-1], end_reward), xycoords="data", xytext=(1.0, 0.03 if upper else 0.97),
                    textcoords="axes fraction", ha="right", va="bottom" if upper else "top", color="tab:green",
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "tab:green", "alpha": 0.9},
                    arrowprops={"arrowstyle": "->", "color": "tab:green", "lw": 1})
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("reward")
    ax.grid(alpha=0.3)
    kls = [s.get("kl", math.nan) for s in steps]
    handles, labels = ax.get_legend_handles_labels()
    if any(math.isfinite(k) for k in kls):
        ax2 = ax.twinx()
        ax2.plot(xs, kls, color="tab:red", lw=1, alpha=0.8, label="KL to reference")
        ax2.set_ylabel("KL", color="tab:red")
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, loc="upper left", fontsize=8, framealpha=0.85)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Confusion matrices (drawn for the TS report: `py-trainer plot confusion IN.json OUT.png`)


def check_confusion_spec(spec) -> tuple[list[str], list[str], list[tuple[str, list[list[int]]]]]:
    """Validates the confusion-matrix spec the TS report writes and returns (gold labels, answer
    columns, [(variant, matrix)]). Raises ValueError naming the field. Shape: {"title": str,
    "gold": [label...], "answers": [label..., "(none)"], "variants": [{"name": str, "matrix":
    [[count per answer column] per gold label]}]}."""
    if not isinstance(spec, dict):
        raise ValueError("expected a JSON object at the top level")
    gold, answers, variants = spec.get("gold"), spec.get("answers"), spec.get("variants")
    for name, xs in (("gold", gold), ("answers", answers)):
        if not isinstance(xs, list) or not xs or not all(isinstance(x, str) for x in xs):
            raise ValueError(f"{name}: must be a non-empty list of strings")
    if not isinstance(variants, list) or not variants:
        raise ValueError("variants: must be a non-empty list")
    out = []
    for i, v in enumerate(variants):
        m = v.get("matrix") if isinstance(v, dict) else None
        if not isinstance(v, dict) or not isinstance(v.get("name"), str):
            raise ValueError(f"variants[{i}].name: must be a string")
        if (not isinstance(m, list) or len(m) != len(gold)
                or any(not isinstance(r, list) or len(r) != len(answers) for r in m)
                or any(not isinstance(c, int) or isinstance(c, bool) or c < 0 for r in m for c in r)):
            raise ValueError(f"variants[{i}].matrix: must be {len(gold)} rows (gold) of {len(answers)} "
                             "non-negative integer counts (answers)")
        out.append((v["name"], m))
    return gold, answers, out


def write_confusion_plot(path: Path, spec: dict) -> None:
    """One heatmap per variant, side by side: rows the gold label, columns the answer given
    (the last column counts unparseable answers), each cell's count written in it, colour the
    share of its row, so a constant predictor shows as one dark column."""
    gold, answers, variants = check_confusion_spec(spec)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    size = 0.42 * max(len(gold), len(answers)) + 2.2
    fig, axes = plt.subplots(1, len(variants), figsize=(size * len(variants), size), dpi=110, squeeze=False)
    for ax, (name, m) in zip(axes[0], variants):
        shares = [[c / max(1, sum(row)) for c in row] for row in m]
        ax.imshow(shares, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        for i, row in enumerate(m):
            for j, c in enumerate(row):
                if c:
                    ax.text(j, i, str(c), ha="center", va="center", fontsize=7,
                            color="white" if shares[i][j] > 0.5 else "black")
        ax.set_xticks(range(len(answers)), answers, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(gold)), gold, fontsize=7)
        ax.set_xlabel("answer")
        ax.set_ylabel("gold label")
        total = sum(map(sum, m))
        correct = sum(m[i][answers.index(g)] for i, g in enumerate(gold) if g in answers)
        ax.set_title(f"{name}: {correct}/{total} correct", fontsize=9)
    fig.suptitle(str(spec.get("title", "")), fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    write_atomic(path, buf.getvalue())
