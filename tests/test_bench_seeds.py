"""scripts/bench_seeds.py: its table and last line from a sweep.json, numbers printed as the TS report prints them."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_seeds", ROOT / "scripts" / "bench_seeds.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("x,digits,js", [
    # what Number.prototype.toFixed prints (node -e), ties included
    (6.25, 1, "6.3"), (-6.25, 1, "-6.3"), (15.2, 1, "15.2"), (75.5, 0, "76"), (-0.5, 0, "-1"),
    (0.0, 1, "0.0"), (-0.04, 1, "-0.0"), (258.0, 0, "258"), (0.7224, 2, "0.72"), (0.125, 2, "0.13"),
])
def test_to_fixed_is_javascripts(bench, x, digits, js):
    assert bench.to_fixed(x, digits) == js


def _seed(seed, verdict, delta, state="SUCCEEDED"):
    return {"seed": seed, "runId": f"s-{seed}", "state": state, "verdict": verdict, "trainSeconds": 80.4 if state == "SUCCEEDED" else None,
            "wallSeconds": 100.0 + seed,
            "heldOut": {"start": 0.199, "end": 0.352, "relativeChange": 0.76, "ciLow": 0.36, "ciHigh": 1.33},
            "downstream": {"n": 264, "delta": delta, "ciLow": delta - 0.05, "ciHigh": delta + 0.05, "method": "Tango score interval"},
            "heldOutTemplate": None}


def test_table_rows(bench, capsys):
    bench.print_table({"seeds": [_seed(1, "CONFIRMED", 0.152), _seed(2, "INCONCLUSIVE", 0.0625, state="FAILED")]})
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["seed", "held-out", "reward"]
    assert "0.199 -> 0.352" in out[2] and "+76% [+36%, +133%]" in out[2] and "+15.2 pp [+10.2, +20.2]" in out[2]
    assert re.search(r"CONFIRMED\s+80$", out[2].rstrip())
    assert "+6.3 pp" in out[3] and "INCONCLUSIVE (FAILED)" in out[3] and out[3].rstrip().endswith("-")


def test_user_mistakes_are_one_line_exit_2(bench, capsys, tmp_path):
    for argv, words in ((["--seeds", "0"], "--seeds must be >= 1"), (["--seeds", "x"], "invalid int value"),
                        (["--config", str(tmp_path / "none.json")], "no such file")):
        with pytest.raises(SystemExit) as e:
            bench.main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err.strip()
        assert words in err and "\n" not in err and err.startswith("bench_seeds: ")
