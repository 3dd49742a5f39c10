"""Every checked-in parity vector (tests/vectors/*.json, written by the TS code) through the Python
ports, with the same comparison as `make parity` (scripts/parity.py)."""

from __future__ import annotations

import importlib.util
import json
import math
import re
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
        "finalNumber", "finalNumberMatchReward", "stopsAfterAnswerReward",
        "composeRewards", "buildReward", "composeRewardSpecs", "rewardNames", "normalCdf", "normalQuantile",
        "studentTQuantile", "mean", "sampleSd", "standardError", "wilsonInterval", "mcnemarExactP",
        "pairedComparison", "pairedBootstrapCI", "requiredNForDelta", "minimumDetectableEffect", "cohenKappa",
        "fleissKappa", "startVsEnd", "trend", "Rng", "nanMean", "nanSampleSd", "bootstrapMeanCI",
        "tangoScoreInterval", "operatingCharacteristic", "passAtK", "holmAdjust", "clusteredMeanSE", "hamedRaoTrend", "plannedPairedSd", "kendallW",
        "relativeChangeCI", "kendallTauB", "intervalOverRuns", "pairedProportionGate", "simulatedOperatingCharacteristic", "noSpread",
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


# ---------------------------------------------------------------------------------------------
# Curve thresholds: ts_agent/src/agent/report/thresholds.ts -> py_trainer/core/curve_thresholds.json


def _ts_curve_thresholds() -> dict:
    """CURVE_THRESHOLDS as written in thresholds.ts (its object literal, read without node)."""
    source = (ROOT / "ts_agent" / "src" / "agent" / "report" / "thresholds.ts").read_text()
    body = re.search(r"CURVE_THRESHOLDS\b[^=]*=\s*Object\.freeze\(\{(.*?)\}\)", source, re.S).group(1)
    return {k: json.loads(v) for k, v in re.findall(r"(\w+):\s*([-+0-9.eE]+)\s*,", body)}


def test_curve_thresholds_json_is_what_vectors_ts_writes():
    from py_trainer.core import curve_thresholds

    text = curve_thresholds.JSON_PATH.read_text(encoding="utf-8")
    data = json.loads(text)
    assert data == _ts_curve_thresholds()
    # formatCurveThresholds: JSON.stringify(sorted, null, 2) + newline
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"


def test_curve_thresholds_constants_equal_the_json():
    from py_trainer.core import curve_thresholds as ct

    data = json.loads(ct.JSON_PATH.read_text(encoding="utf-8"))
    assert ct.CURVE_THRESHOLDS == data
    assert set(data) == {"clipped_ratio_warn", "zero_std_warn", "zero_std_warn_steps", "zero_std_rel_tol",
                         "kl_spike_factor", "kl_spike_min", "kl_spike_mads", "kl_spike_window", "kl_spike_every"}
    for key, value in data.items():
        assert getattr(ct, key.upper()) == value, key
    assert isinstance(ct.ZERO_STD_WARN_STEPS, int) and isinstance(ct.KL_SPIKE_EVERY, int)
    for name in ("CLIPPED_RATIO_WARN", "ZERO_STD_WARN", "KL_SPIKE_FACTOR", "KL_SPIKE_MIN", "KL_SPIKE_MADS"):
        assert isinstance(getattr(ct, name), float), name


def test_parity_fails_on_stale_curve_thresholds(tmp_path):
    from py_trainer.core import curve_thresholds as ct

    fresh = tmp_path / "fresh.json"
    fresh.write_bytes(ct.JSON_PATH.read_bytes())
    assert harness.check_curve_thresholds(fresh) == []
    stale = tmp_path / "stale.json"
    stale.write_text(ct.JSON_PATH.read_text().replace('"kl_spike_every": 10', '"kl_spike_every": 11'))
    problems = harness.check_curve_thresholds(stale)
    assert any("is stale" in p for p in problems) and any("KL_SPIKE_EVERY" in p for p in problems)
    reformatted = tmp_path / "compact.json"
    reformatted.write_text(json.dumps(ct.CURVE_THRESHOLDS, sort_keys=True))  # same values, other bytes
    assert [p for p in harness.check_curve_thresholds(reformatted) if "is stale" in p]
