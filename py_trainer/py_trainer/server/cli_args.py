"""The argparse pieces every `py-trainer` command group uses: a parser whose mistakes are one line
(exit 2), integer and float types that check their range, and the runs/data root flags."""

from __future__ import annotations

import argparse
import difflib
import os
from pathlib import Path


class UsageError(Exception):
    """A command-line mistake: printed as one line, exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line ("py-trainer train: --config is required"), not usage + error."""

    def error(self, message: str):
        import re

        if m := re.match(r"argument \w+: invalid choice: '(.*?)' \(choose from (.*)\)$", message):
            choices = [c.strip(" '") for c in m.group(2).split(",")]
            near = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.5)
            hint = f" (did you mean {near[0]}?)" if near else f"; commands: {', '.join(choices)}"
            message = f"unknown command '{m.group(1)}'{hint}"
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def int_in(lo: int, hi: int | None = None):
    """An argparse type: an integer in [lo, hi] ("--port: must be in [0, 65535], got -3"), where
    plain int would take -3 (a port then wraps to 65533)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"must be in [{lo}, {hi}], got {value}" if hi is not None
                                             else f"must be >= {lo}, got {value}")
        return value

    parse.__name__ = "int"
    return parse


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def add_roots(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs-root", type=Path, default=Path(os.environ.get("PY_TRAINER_RUNS_ROOT", "runs")),
                   help="folder holding one sub-folder per run (default: ./runs or $PY_TRAINER_RUNS_ROOT)")
    p.add_argument("--data-root", type=Path, default=Path(os.environ.get("PY_TRAINER_DATA_ROOT", ".")),
                   help="dataset, model and adapter paths in requests are relative to, and confined to, "
                        "this folder (default: . or $PY_TRAINER_DATA_ROOT)")
