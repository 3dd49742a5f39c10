"""Every checked-in parity vector (tests/vectors/*.json, written by the TS code) through the Python
ports, with the same comparison as `make parity` (scripts/parity.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "vectors"


def _load_harness():
    spec = importlib.util.spec_from_file_location("parity_harness", ROOT / "scripts" / "parity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


harness = _load_harness()
FILES = sorted(VECTORS.glob("*.json"))


def _cases():
    for path in FILES:
        data = harness.load(path)
        for i, case in enumerate(data["cases"]):
            yield pytest.param(data, case, id=f"{data['function']}[{i}] {case['name']}")


def test_every_function_has_vectors():
    names = {p.stem for p in FILES}
    assert names == {
        "groupRelativeAdvantage", "normalizeAnswer", "extractAnswer", "exactMatchReward", "formatReward",
        "composeRewards", "buildReward", "composeRewardSpecs", "rewardNames", "normalCdf", "normalQuantile",
        "studentTQuantile", "mean", "sampleSd", "standardError", "wilsonInterval", "mcnemarExactP",
        "pairedComparison", "pairedBootstrapCI", "requiredNForDelta", "minimumDetectableEffect", "cohenKappa",
        "fleissKappa", "startVsEnd", "trend", "Rng",
    }
    for path in FILES:
        data = json.loads(path.read_text())
        assert data["python"] in harness.ADAPTERS, data["python"]
        assert any("error" in c for c in data["cases"]) or data["function"] in {"normalizeAnswer", "rewardNames"}


@pytest.mark.parametrize("data,case", list(_cases()))
def test_vector(data, case):
    problems = harness.check_case(data["python"], case, data["tolerance"]["ulp"], harness.Diff())
    assert problems == []


def test_the_check_can_fail():
    """A changed expected value, error kind or integer is caught (the harness is not vacuous)."""
    data = harness.load(VECTORS / "pairedComparison.json")
    case = next(c for c in data["cases"] if "expected" in c and c["expected"]["binary"])
    tol = data["tolerance"]["ulp"]
    bumped = json.loads(json.dumps(case))
    bumped["expected"]["meanDiff"] = math.nextafter(case["expected"]["meanDiff"], math.inf)
    for _ in range(tol):
        bumped["expected"]["meanDiff"] = math.nextafter(bumped["expected"]["meanDiff"], math.inf)
    assert harness.check_case(data["python"], bumped, tol, harness.Diff())
    bumped = json.loads(json.dumps(case))
    bumped["expected"]["discordant"]["b"] += 1
    assert harness.check_case(data["python"], bumped, tol, harness.Diff())
    err = next(c for c in data["cases"] if "error" in c)
    wrong = {**err, "error": {**err["error"], "kind": "empty" if err["error"]["kind"] != "empty" else "nan"}}
    assert harness.check_case(data["python"], wrong, tol, harness.Diff())


def test_codec_and_names():
    assert harness.decode(["NaN", "-0", "Infinity", "-Infinity", "x"])[1:4] == [-0.0, math.inf, -math.inf]
    assert math.copysign(1, harness.decode("-0")) == -1
    assert harness.snake_case("pairedBootstrapCI") == "paired_bootstrap_ci"
    assert harness.snake_case("requiredNForDelta") == "required_n_for_delta"
    assert harness.snake_case("ciT") == "ci_t"
    assert harness.ulp_distance(1.0, math.nextafter(1.0, 2.0)) == 1
    assert harness.ulp_distance(-0.0, 0.0) == 1
    assert harness.ulp_distance(math.inf, 1.7976931348623157e308) == math.inf
    assert harness.ulp_distance(math.inf, math.inf) == 0
