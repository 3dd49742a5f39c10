"""Progress a log file shows: one live line (rewritten on a TTY, printed every few steps or seconds
off one), and the training step line with its mode's metrics and an ETA."""

from __future__ import annotations

import sys
import time

from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb



def clock(seconds: float) -> str:
    """"m:ss" (or "h:mm:ss")."""
    s = int(round(max(seconds, 0.0)))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


class ProgressLine:
    """A live line: rewritten in place on a TTY; off a TTY (a log file, CI) printed at most once
    every `every_steps` updates or `every_s` seconds, and always for the last one (`force`)."""

    def __init__(self, stream=None, *, every_steps: int = 10, every_s: float = 10.0):
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self.every_steps, self.every_s = max(1, every_steps), every_s
        self.count, self.shown_at, self.live = 0, float("-inf"), False

    def update(self, text: str, *, force: bool = False) -> None:
        now = time.monotonic()
        self.count += 1
        if self.tty:
            self.stream.write(f"\r{text:<78}")
            self.live = True
        elif force or self.count % self.every_steps == 0 or now - self.shown_at >= self.every_s:
            self.stream.write(text + "\n")
            self.shown_at = now
        else:
            return
        self.stream.flush()

    def say(self, text: str) -> None:
        """A line of its own (a state change, a warning), below the live line."""
        self.end()
        self.stream.write(text + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.live = False


# Which metrics the live line shows, per mode: GRPO's reward and KL; the ranked-preference mode's
# held-out pairwise accuracy and DPO loss (it has no reward or kl).
LINE_METRICS = {
    pb.TRAIN_MODE_RANKED_PREFERENCE: (("heldout/pairwise_accuracy", 3), ("rewards/margins", 3), ("loss", 4)),
}
GRPO_LINE_METRICS = (("reward", 3), ("kl", 4))


class TrainProgress:
    """The training line: step, the mode's metrics, elapsed, and an ETA from training steps only
    (the first train step is the anchor, so the step-0 held-out measurement never counts)."""

    def __init__(self, mode: int, line: ProgressLine):
        self.metrics = LINE_METRICS.get(mode, GRPO_LINE_METRICS)
        self.line = line
        self.t0 = time.monotonic()
        self.anchor: tuple[int, float] | None = None

    def text(self, step: int, max_steps: int, metrics, now: float) -> str:
        if step > 0 and self.anchor is None:
            self.anchor = (step, now)
        eta = "-:--"
        if self.anchor and step > self.anchor[0]:
            per_step = (now - self.anchor[1]) / (step - self.anchor[0])
            eta = clock(per_step * max(max_steps - step, 0))
        elif step >= max_steps:
            eta = clock(0)
        shown = " ".join(f"{name} {metrics[name]:.{d}f}" if name in metrics else f"{name} -"
                         for name, d in self.metrics)
        return f"step {step}/{max_steps} {shown} elapsed {clock(now - self.t0)} ETA {eta}"

    def step(self, step: int, max_steps: int, metrics) -> None:
        self.line.update(self.text(step, max_steps, metrics, time.monotonic()), force=step >= max_steps)
