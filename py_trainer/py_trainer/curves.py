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

from py_trainer.atomic import write_atomic

GRPO_CSV_COLUMNS = ("step", "reward", "reward_smoothed", "reward_std", "kl", "frac_reward_zero_std",
                    "completions/clipped_ratio", "completions/mean_length", "loss", "grad_norm",
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [s["step"] for s in steps]
    rewards = [s.get("reward", math.nan) for s in steps]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ax.plot(xs, rewards, color="tab:blue", alpha=0.35, lw=1, label="reward (train batch)")
    ax.plot(xs, smooth(rewards), color="tab:blue", lw=2, label=f"reward, {SMOOTH_WINDOW}-step mean")
    if start_reward is not None and math.isfinite(start_reward):
        ax.axhline(start_reward, color="tab:gray", ls="--", lw=1.2, label=f"step-0 held-out reward {start_reward:.3f}")
    if end_reward is not None and math.isfinite(end_reward) and xs:
        label = f"end held-out reward {end_reward:.3f}"
        if start_reward:
            label += f" ({(end_reward - start_reward) / abs(start_reward) * 100:+.1f}% vs step 0)"
        ax.scatter([xs[-1]], [end_reward], color="tab:green", zorder=5, s=40, label=label)
        ax.annotate(label.split(" (")[-1].rstrip(")") if start_reward else f"{end_reward:.3f}",
                    (xs[-1], end_reward), textcoords="offset points", xytext=(-10, 8), ha="right",
                    color="tab:green")
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
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    write_atomic(path, buf.getvalue())
