"""The statistics, the PRNG and the percentile rule: xoshiro128** seeded by SplitMix32, the percentile interval, Interval.

Port of ts_agent/src/agent/core/stats/rng.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from py_trainer.core.stats.elementary import TWO_POW_32
from py_trainer.core.stats.errors import check_integer, fail


_M32 = 0xFFFFFFFF


class Rng:
    """xoshiro128** seeded by SplitMix32; the stream of the TS code's Rng, draw for draw."""

    def __init__(self, seed: int):
        seed = check_integer("seed", seed, 0)
        if seed >= TWO_POW_32:
            fail("out_of_range", f"seed must be < 2^32, got {seed}")
        x = seed
        words = []
        for _ in range(4):
            x = (x + 0x9E3779B9) & _M32
            z = x
            z = ((z ^ (z >> 16)) * 0x85EBCA6B) & _M32
            z = ((z ^ (z >> 13)) * 0xC2B2AE35) & _M32
            words.append(z ^ (z >> 16))
        self._s0, self._s1, self._s2, self._s3 = words

    def next_uint32(self) -> int:
        """Next uint32 in [0, 2^32)."""
        s1 = self._s1
        m = (s1 * 5) & _M32
        result = ((((m << 7) | (m >> 25)) & _M32) * 9) & _M32
        t = (s1 << 9) & _M32
        self._s2 ^= self._s0
        self._s3 ^= self._s1
        self._s1 ^= self._s2
        self._s0 ^= self._s3
        self._s2 ^= t
        self._s3 = ((self._s3 << 11) | (self._s3 >> 21)) & _M32
        return result

    def next_index(self, n: int) -> int:
        """Uniform integer in [0, n) for 1 <= n <= 2^32, by rejection."""
        limit = TWO_POW_32 - (TWO_POW_32 % n)
        while True:
            x = self.next_uint32()
            if x < limit:
                return x % n


def _percentile(sorted_xs: list[float], q: float) -> float:
    h = (len(sorted_xs) - 1) * q
    i = math.floor(h)
    if i >= len(sorted_xs) - 1:
        return sorted_xs[-1]
    lo, hi = sorted_xs[i], sorted_xs[i + 1]
    if h == i or lo == hi:
        return lo
    # An interpolation that touches an infinity is that infinity (as the TS code).
    if not math.isfinite(lo) or not math.isfinite(hi):
        return lo if lo == -math.inf and (hi != math.inf or q < 0.5) else hi
    return lo + (h - i) * (hi - lo)


def percentile_interval(stats: list[float], confidence: float) -> "Interval":
    s = sorted(stats)
    q = (1 - confidence) / 2
    return Interval(lower=_percentile(s, q), upper=_percentile(s, 1 - q))


@dataclass(frozen=True)
class Interval:
    """A two-sided interval."""

    lower: float
    upper: float
