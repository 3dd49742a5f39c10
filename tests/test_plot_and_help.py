"""Issue 32, item 8 (small things, Python side): the reward plot's x axis shows whole optimizer
steps and its "+N% vs step 0" label sits off the curve (it sat on the curve's last points);
`py-trainer --help`'s summary names every sub-command; the baseline history is not tracked."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from matplotlib.text import Text

from py_trainer.plots.curves import reward_figure
from py_trainer.server import cli


def _steps(n: int, end: float):
    # a curve that rises to its end value at the last step, where the label is anchored
    return [{"step": i, "reward": 0.5 + (end - 0.5) * i / (n - 1), "kl": 0.01 * i} for i in range(1, n + 1)]


def test_the_x_axis_ticks_are_whole_steps():
    fig = reward_figure(_steps(3, 0.9), start_reward=0.5, end_reward=0.98, title="t")
    ax = fig.axes[0]
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_the_change_label_does_not_cover_the_curve():
    for end in (0.98, 0.2):
        fig = reward_figure(_steps(20, end), start_reward=0.5, end_reward=end, title="t")
        ax = fig.axes[0]
        fig.canvas.draw()
        label = next(t for t in ax.texts if "vs step 0" in t.get_text())
        # the text's own box (an Annotation's extent also spans its arrow, which points at the curve)
        box = Text.get_window_extent(label, fig.canvas.get_renderer()).expanded(1.05, 1.2)
        for line in ax.get_lines():
            xy = ax.transData.transform(list(zip(line.get_xdata(), line.get_ydata())))
            inside = [p for p in xy if all(map(math.isfinite, p)) and box.contains(*p)]
            assert not inside, (end, line.get_label(), inside)
        end_dot = ax.transData.transform([(20, end)])[0]
        assert not box.contains(*end_dot)


def test_the_help_summary_names_every_sub_command(capsys):
    # `py-trainer --help` began "serve | train | evaluate | defaults | init-model | data": no plot, no export
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    first = capsys.readouterr().out.split("\n\n")[1].splitlines()[0]
    assert first.startswith("`py-trainer`:"), first
    for name in ("serve", "train", "evaluate", "defaults", "init-model", "plot", "data", "export"):
        assert f" {name} " in first + " ", first


def test_the_baseline_history_is_not_tracked_by_git():
    ignored = (Path(__file__).resolve().parents[1] / ".gitignore").read_text().splitlines()
    assert "agent-evals/baseline-history.jsonl" in ignored
