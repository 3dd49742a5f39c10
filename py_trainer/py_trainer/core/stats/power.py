"""The statistics, power: required n, MDE, the operating characteristic, the paired-proportion gate and its simulation, the planned sd.

Port of ts_agent/src/agent/core/stats/power.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from py_trainer.core.stats.distributions import normal_cdf, normal_quantile, z_critical
from py_trainer.core.stats.elementary import TWO_POW_32
from py_trainer.core.stats.errors import check_integer, check_number, check_probability, fail
from py_trainer.core.stats.paired import mcnemar_exact_p, tango_score_interval
from py_trainer.core.stats.rng import Rng


def _check_power_inputs(sd_diff: float, alpha: float, power: float) -> tuple[float, float]:
    check_number("sdDiff", sd_diff)
    if sd_diff < 0:
        fail("out_of_range", f"sdDiff must be >= 0, got {sd_diff}")
    check_probability("alpha", alpha)
    check_probability("power", power)
    za = z_critical(alpha)
    zb = normal_quantile(power)
    if not za + zb > 0:
        fail("out_of_range", f"power ({power}) must exceed alpha / 2 ({alpha / 2})")
    return za, zb


def required_n_for_delta(delta: float, sd_diff: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Pairs needed to detect a mean paired difference ``delta``: ceil(((z_{1-alpha/2} + z_power)
    * sd_diff / |delta|)^2), at least 1."""
    check_number("delta", delta)
    if delta == 0:
        fail("zero_delta", "delta must be non-zero")
    za, zb = _check_power_inputs(sd_diff, alpha, power)
    k = ((za + zb) * sd_diff) / abs(delta)
    n2 = k * k
    if not n2 <= 9007199254740992:
        fail("out_of_range", f"required n ({n2}) exceeds 2^53")
    return max(1, math.ceil(n2))


def minimum_detectable_effect(n: int, sd_diff: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest |mean paired difference| detectable with n pairs: (z_{1-alpha/2} + z_power) * sd_diff / sqrt(n)."""
    n = check_integer("n", n, 1)
    za, zb = _check_power_inputs(sd_diff, alpha, power)
    return ((za + zb) * sd_diff) / math.sqrt(n)


@dataclass(frozen=True)
class OperatingCharacteristic:
    """Result of operating_characteristic: se, P(PASS gate), P(CONFIRMED gate)."""

    se: float
    p_pass: float
    p_confirm: float


def operating_characteristic(
    true_delta: float, sd_diff: float, n: int, *, threshold: float, alpha: float = 0.05
) -> OperatingCharacteristic:
    """P(PASS) and P(CONFIRMED) of the milestone gates at a true mean difference, by the normal
    approximation (method in the TS code's operatingCharacteristic)."""
    check_number("trueDelta", true_delta)
    check_number("sdDiff", sd_diff)
    if sd_diff < 0:
        fail("out_of_range", f"sdDiff must be >= 0, got {sd_diff}")
    n = check_integer("n", n, 1)
    threshold = check_number("threshold", threshold)
    alpha = check_probability("alpha", alpha)
    z = z_critical(alpha)
    se = sd_diff / math.sqrt(n)
    if se == 0:
        return OperatingCharacteristic(
            se=se, p_pass=1.0 if true_delta >= threshold and true_delta > 0 else 0.0, p_confirm=1.0 if true_delta >= threshold else 0.0
        )
    gate = threshold if threshold > z * se else z * se
    return OperatingCharacteristic(
        se=se, p_pass=normal_cdf((true_delta - gate) / se), p_confirm=normal_cdf((true_delta - threshold - z * se) / se)
    )


@dataclass(frozen=True)
class PairedProportionGate:
    """Result of paired_proportion_gate: pass (PASS or CONFIRMED), confirm (CONFIRMED)."""

    passes: bool
    confirm: bool


def paired_proportion_gate(b: int, c: int, n: int, *, threshold: float, alpha: float = 0.05) -> PairedProportionGate:
    """The downstream gate on one 0/1 paired table: Tango's interval and the exact McNemar test
    (rule in the TS code's pairedProportionGate)."""
    threshold = check_number("threshold", threshold)
    alpha = check_probability("alpha", alpha)
    t = tango_score_interval(b, c, n, confidence=1 - alpha)
    rejects = mcnemar_exact_p(b, c) < alpha
    if t.upper < threshold:
        return PairedProportionGate(passes=False, confirm=False)
    if rejects != (t.lower > 0):
        return PairedProportionGate(passes=False, confirm=False)
    if t.lower >= threshold:
        return PairedProportionGate(passes=True, confirm=True)
    return PairedProportionGate(passes=t.estimate >= threshold and rejects, confirm=False)


GATE_SIMULATION_DRAWS = 10000
GATE_SIMULATION_SEED = 0


@dataclass(frozen=True)
class SimulatedOperatingCharacteristic:
    """Result of simulated_operating_characteristic (fields as the TS code's)."""

    p_pass: float
    p_confirm: float
    discordance: float
    draws: int
    seed: int
    mc_error: float


def simulated_operating_characteristic(
    true_delta: float,
    discordance: float,
    n: int,
    *,
    threshold: float,
    alpha: float = 0.05,
    draws: int = GATE_SIMULATION_DRAWS,
    seed: int = GATE_SIMULATION_SEED,
) -> SimulatedOperatingCharacteristic:
    """P(PASS) and P(CONFIRMED) of paired_proportion_gate by simulation, draw for draw the stream
    and model of the TS code's simulatedOperatingCharacteristic."""
    check_number("trueDelta", true_delta)
    if true_delta < -1 or true_delta > 1:
        fail("out_of_range", f"trueDelta must be in [-1, 1], got {true_delta}")
    check_number("discordance", discordance)
    if discordance < 0 or discordance > 1:
        fail("out_of_range", f"discordance must be in [0, 1], got {discordance}")
    n = check_integer("n", n, 1)
    threshold = check_number("threshold", threshold)
    alpha = check_probability("alpha", alpha)
    draws = check_integer("draws", draws, 1)
    rng = Rng(seed)
    q = discordance if discordance > abs(true_delta) else abs(true_delta)
    cut_b = math.floor(((q - true_delta) / 2) * TWO_POW_32)
    cut_c = math.floor(q * TWO_POW_32)
    memo: dict[tuple[int, int], int] = {}
    passes = confirms = 0
    nxt = rng.next_uint32
    for _ in range(draws):
        b = c = 0
        for _ in range(n):
            u = nxt()
            if u < cut_b:
                b += 1
            elif u < cut_c:
                c += 1
        g = memo.get((b, c))
        if g is None:
            gate = paired_proportion_gate(b, c, n, threshold=threshold, alpha=alpha)
            g = 2 if gate.confirm else 1 if gate.passes else 0
            memo[(b, c)] = g
        if g >= 1:
            passes += 1
        if g == 2:
            confirms += 1
    return SimulatedOperatingCharacteristic(
        p_pass=passes / draws, p_confirm=confirms / draws, discordance=q, draws=draws, seed=seed, mc_error=0.5 / math.sqrt(draws)
    )


@dataclass(frozen=True)
class PlannedPairedSd:
    """Result of planned_paired_sd (method in the TS code's plannedPairedSd)."""

    p_base: float
    p_candidate: float
    discordance: float
    sd_diff: float


def planned_paired_sd(p_base: float, delta: float, *, model: str) -> PlannedPairedSd:
    """The sd of a 0/1 paired difference for planning: sqrt(P(discordant) - delta^2) under the
    "conversions" or "independent" model of how the two models' errors overlap."""
    check_number("pBase", p_base)
    check_number("delta", delta)
    if p_base < 0 or p_base > 1:
        fail("out_of_range", f"pBase must be in [0, 1], got {p_base}")
    p_c = p_base + delta
    if p_c < 0 or p_c > 1:
        fail("out_of_range", f"pBase + delta must be in [0, 1], got {p_c}")
    if model not in ("conversions", "independent"):
        fail("bad_option", f'model must be "conversions" or "independent", got {model!r}')
    disc = abs(delta) if model == "conversions" else p_base * (1 - p_c) + (1 - p_base) * p_c
    v = disc - delta * delta
    return PlannedPairedSd(p_base=p_base, p_candidate=p_c, discordance=disc, sd_diff=math.sqrt(v if v > 0 else 0.0))
