"""Where a training step's wall time goes (summary.json's ``time_breakdown``): TRL's methods wrapped
on one trainer instance, phase by phase, with totals, shares and per-step medians."""

from __future__ import annotations

import time
from typing import Callable


STEP_PHASES = ("generation", "scoring", "rollout_logprobs", "forward", "backward", "optimizer", "other",
               "between_steps")
TIMER_WARMUP_STEPS = 2  # left out of the medians: the first steps pay one-off costs (allocations, lazy init)


class StepTimer:
    """Where each training step's wall time goes, split as scripts/gpu_check.py splits it (summary.json's
    ``time_breakdown``; the report's PPO-vs-GRPO compute rows read it). TRL's own methods are wrapped
    on this trainer instance: generation = `_generate`, scoring = `_calculate_rewards`,
    rollout_logprobs = the rest of `_generate_and_score_completions` (the old / reference policy
    forwards TRL runs before the loss), forward = `compute_loss`, backward = `accelerator.backward`;
    optimizer = between the pre- and post-optimizer-step callbacks; other = the rest of the step;
    between_steps = from a step's end to the next one's start (logging, our events, checkpoints).
    A method the trainer lacks (DPO generates nothing) stays 0. On CUDA every boundary synchronises."""

    WRAPPED = (("_generate", "generation"), ("_calculate_rewards", "scoring"),
               ("_generate_and_score_completions", "rollout"), ("compute_loss", "forward"))

    def __init__(self):
        self.steps: list[dict[str, float]] = []
        self.current: dict[str, float] = {}
        self.marks: dict[str, float] = {}
        self.sync: Callable[[], None] = lambda: None

    def attach(self, trainer) -> None:
        import torch

        if torch.cuda.is_available() and next(trainer.model.parameters()).is_cuda:
            self.sync = torch.cuda.synchronize
        for name, phase in self.WRAPPED:
            if callable(getattr(trainer, name, None)):
                self._wrap(trainer, name, phase)
        self._wrap(trainer.accelerator, "backward", "backward")
        trainer.add_callback(self._callback())

    def _wrap(self, owner, name: str, phase: str) -> None:
        fn = getattr(owner, name)

        def timed(*a, **kw):
            self.sync()
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.sync()
                self.current[phase] = self.current.get(phase, 0.0) + time.perf_counter() - t

        setattr(owner, name, timed)

    def _mark(self, what: str) -> None:
        self.sync()
        now = time.perf_counter()
        if what in ("step_begin", "train_end") and "step_end" in self.marks and self.steps:
            self.steps[-1]["between_steps"] += now - self.marks.pop("step_end")  # its log, events, checkpoint
        if what == "step_begin":
            self.current = {}
        elif what == "optimizer_end" and "optimizer_begin" in self.marks:
            self.current["optimizer"] = self.current.get("optimizer", 0.0) + now - self.marks.pop("optimizer_begin")
        elif what == "step_end" and "step_begin" in self.marks:
            c = {p: self.current.get(p, 0.0) for p in STEP_PHASES}
            c["rollout_logprobs"] = max(0.0, self.current.get("rollout", 0.0) - c["generation"] - c["scoring"])
            c["other"] = max(0.0, now - self.marks["step_begin"] - sum(c.values()))
            self.steps.append(c)
        self.marks[what] = now

    def _callback(self):
        from transformers import TrainerCallback

        mark = self._mark

        class StepTimerCallback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                mark("step_begin")

            def on_pre_optimizer_step(self, args, state, control, **kw):
                mark("optimizer_begin")

            def on_optimizer_step(self, args, state, control, **kw):
                mark("optimizer_end")

            def on_step_end(self, args, state, control, **kw):
                mark("step_end")

            def on_train_end(self, args, state, control, **kw):
                mark("train_end")

        return StepTimerCallback()

    def summary(self, run_seconds: dict[str, float]) -> dict:
        """Totals over every step, each phase's share of them, and per-step medians past the warm-up
        (seconds); `run_seconds`: the run's phases outside the training loop."""
        import statistics

        measured = self.steps[TIMER_WARMUP_STEPS:] or self.steps
        totals = {p: sum(s[p] for s in self.steps) for p in STEP_PHASES}
        whole = sum(totals.values())
        return {
            "steps": len(self.steps),
            "step_seconds_total": {p: round(v, 4) for p, v in totals.items()},
            "step_share": {p: round(v / whole, 4) if whole else 0.0 for p, v in totals.items()},
            "median_step_seconds": {p: round(statistics.median(s[p] for s in measured), 5) if measured else 0.0
                                    for p in STEP_PHASES},
            "median_step_total_seconds": round(statistics.median(sum(s.values()) for s in measured), 5)
            if measured else 0.0,
            "run_seconds": {k: round(v, 3) for k, v in run_seconds.items()},
            "method": "wall clock; TRL's _generate, _calculate_rewards, _generate_and_score_completions, "
                      "compute_loss and accelerator.backward wrapped; optimizer between the optimizer-step callbacks",
        }
