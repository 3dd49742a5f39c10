"""The statistics, errors and input checks: StatsInputError and its kinds, the checks every function runs first.

Port of ts_agent/src/agent/core/stats/errors.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math
import numbers
from typing import Sequence


class StatsInputError(ValueError):
    """Invalid input; ``kind`` is one of the stable kinds of the TS code's StatsErrorKind:
    empty, length_mismatch, too_few, zero_delta, out_of_range, nan, not_integer, bad_option,
    label_type."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def fail(kind: str, message: str):
    raise StatsInputError(kind, message)


def is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_number(name: str, x) -> float:
    if not is_number(x) or math.isnan(x):
        fail("nan", f"{name} must be a number, got {x!r}")
    if math.isinf(x):
        fail("out_of_range", f"{name} must be finite, got {x}")
    return x


def check_sample(name: str, xs: Sequence[float], min_n: int) -> None:
    if len(xs) == 0:
        fail("empty", f"{name} is empty")
    for i, x in enumerate(xs):
        check_number(f"{name}[{i}]", x)
    if len(xs) < min_n:
        fail("too_few", f"{name} needs at least {min_n} values, got {len(xs)}")


def check_pair(a: Sequence[float], b: Sequence[float], min_n: int) -> None:
    if len(a) == 0 or len(b) == 0:
        fail("empty", "a and b must be non-empty")
    if len(a) != len(b):
        fail("length_mismatch", f"a has {len(a)} values, b has {len(b)}")
    for i, x in enumerate(a):
        check_number(f"a[{i}]", x)
    for i, x in enumerate(b):
        check_number(f"b[{i}]", x)
    if len(a) < min_n:
        fail("too_few", f"needs at least {min_n} pairs, got {len(a)}")


def check_probability(name: str, p) -> float:
    if not is_number(p) or math.isnan(p):
        fail("nan", f"{name} must be a number, got {p!r}")
    if not 0 < p < 1:
        fail("out_of_range", f"{name} must be in (0, 1), got {p}")
    return float(p)


def check_integer(name: str, x, minimum: int) -> int:
    if not is_number(x) or math.isnan(x):
        fail("nan", f"{name} must be a number, got {x!r}")
    if math.isinf(x) or not float(x).is_integer():
        fail("not_integer", f"{name} must be an integer, got {x}")
    if x < minimum:
        fail("out_of_range", f"{name} must be >= {minimum}, got {x}")
    return int(x)


def js_max(x: float, y: float) -> float:
    """Math.max(x, y): NaN if either is NaN, +0 over -0 (Python's max keeps the first of equals
    and lets a NaN second argument through)."""
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if x == y:
        return y if math.copysign(1.0, x) < 0 else x
    return x if x > y else y


def js_min(x: float, y: float) -> float:
    """Math.min(x, y): NaN if either is NaN, -0 under +0."""
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if x == y:
        return x if math.copysign(1.0, x) < 0 else y
    return x if x < y else y
