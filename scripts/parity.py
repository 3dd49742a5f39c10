"""Checks the Python ports (py_trainer.grpo, py_trainer.core.stats) against vectors the TS code wrote.

    .venv/bin/python scripts/parity.py tests/vectors [more files or folders of *.json ...]

Each file is one function's cases in the format documented in ts_agent/src/parity/harness.ts
(the checked-in tests/vectors, or the random cases `scripts/parity.sh` has TS write to a temp
folder). Every case is run through the Python port; results must equal the TS results exactly
for booleans, strings, None and integers, and within the file's ulp tolerance for floats; error
cases must raise the same error class with the same ``kind``. Prints one table row per file
(function, source, cases, error cases, max abs diff, max ulp diff, result) and exits 1 on any
mismatch. tests/test_parity_vectors.py imports this module to run the same checks under pytest.

    .venv/bin/python scripts/parity.py --thresholds /tmp/curve_thresholds.json tests/vectors

``--reward FILE`` names the reward-half cases TS (src/parity/reward.ts) has just written from run
folders: the verdict's held-out relative change and CI, computed in TS from run.json's per-prompt
scores, must equal the sidecar's summary.json numbers (0 ulp), and the TS resamples must be
py_trainer.training.skeleton.BOOTSTRAP_RESAMPLES (one more table row, reward half).

``--thresholds`` names the curve thresholds JSON that TS (src/parity/vectors.ts) has just written
from agent/report/thresholds.ts: it must equal the checked-in
py_trainer/py_trainer/core/curve_thresholds.json byte for byte, and py_trainer.core.curve_thresholds's
constants must equal its values (one more table row, CURVE_THRESHOLDS).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import struct
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_trainer"))

from py_trainer.core import advantage  # noqa: E402

from py_trainer.core import curve_thresholds

from py_trainer.core import stats

from py_trainer.core import task_rewards

# ---------------------------------------------------------------------------------------------
# Codec and names

_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf, "-0": -0.0}


def decode(value: Any) -> Any:
    """Inverse of harness.ts's encode: the strings NaN, Infinity, -Infinity, -0 become floats."""
    if isinstance(value, str):
        return _SPECIAL.get(value, value)
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    return value


def snake_case(name: str) -> str:
    """camelCase to snake_case with acronyms as one word, as harness.ts's snakeCase."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    name = re.sub(r"([A-Z])([A-Z][a-z])", r"\1_\2", name)
    return name.lower()


def to_plain(value: Any) -> Any:
    """Dataclasses to dicts, tuples to lists (keys stay snake_case)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def snake_keys(value: Any) -> Any:
    """TS result objects with their keys in snake_case, to compare with the Python dataclasses."""
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    if isinstance(value, dict):
        return {snake_case(k): snake_keys(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------
# How a case calls the Python port (mirrors FUNCTIONS in harness.ts)


def _compose_rewards(args, kw):
    fns = [task_rewards.WeightedScorer(score=(lambda c, a, v=f["value"]: v), weight=f["weight"]) for f in args[0]]
    return task_rewards.compose_rewards(fns)("", [])


def _build_reward(args, kw):
    built = task_rewards.build_reward(args[0])
    return {"name": built.name, "weight": built.weight, "params": built.params,
            "scores": [built.score(c, args[2]) for c in args[1]]}


def _compose_reward_specs(args, kw):
    score = task_rewards.compose_reward_specs(args[0])
    return [score(c, args[2]) for c in args[1]]


def _rng(args, kw):
    rng = stats.Rng(args[0])
    uint32 = [rng.next_uint32() for _ in range(args[1])]
    indices = [rng.next_index(args[2]) for _ in range(args[1])]
    return {"uint32": uint32, "indices": indices}


def _plain(fn: Callable) -> Callable[[list, dict], Any]:
    return lambda args, kw: fn(*args, **kw)


ADAPTERS: dict[str, Callable[[list, dict], Any]] = {
    "group_relative_advantage": _plain(advantage.group_relative_advantage),
    "normalize_answer": _plain(task_rewards.normalize_answer),
    "extract_answer": _plain(task_rewards.extract_answer),
    "exact_match_reward": _plain(task_rewards.exact_match_reward),
    "format_reward": _plain(task_rewards.format_reward),
    "final_number": _plain(task_rewards.final_number),
    "final_number_match_reward": _plain(task_rewards.final_number_match_reward),
    "stops_after_answer_reward": _plain(task_rewards.stops_after_answer_reward),
    "compose_rewards": _compose_rewards,
    "build_reward": _build_reward,
    "compose_reward_specs": _compose_reward_specs,
    "reward_names": _plain(task_rewards.reward_names),
    "normal_cdf": _plain(stats.normal_cdf),
    "normal_quantile": _plain(stats.normal_quantile),
    "student_t_quantile": _plain(stats.student_t_quantile),
    "no_spread": _plain(stats.no_spread),
    "mean": _plain(stats.mean),
    "sample_sd": _plain(stats.sample_sd),
    "standard_error": _plain(stats.standard_error),
    "nan_mean": _plain(stats.nan_mean),
    "nan_sample_sd": _plain(stats.nan_sample_sd),
    "wilson_interval": _plain(stats.wilson_interval),
    "mcnemar_exact_p": _plain(stats.mcnemar_exact_p),
    "paired_comparison": _plain(stats.paired_comparison),
    "paired_bootstrap_ci": _plain(stats.paired_bootstrap_ci),
    "bootstrap_mean_ci": _plain(stats.bootstrap_mean_ci),
    "interval_over_runs": _plain(stats.interval_over_runs),
    "relative_change_ci": _plain(stats.relative_change_ci),
    "required_n_for_delta": _plain(stats.required_n_for_delta),
    "minimum_detectable_effect": _plain(stats.minimum_detectable_effect),
    "cohen_kappa": _plain(stats.cohen_kappa),
    "kendall_tau_b": _plain(stats.kendall_tau_b),
    "fleiss_kappa": _plain(stats.fleiss_kappa),
    "start_vs_end": _plain(stats.start_vs_end),
    "trend": _plain(stats.trend),
    "tango_score_interval": _plain(stats.tango_score_interval),
    "paired_proportion_gate": _plain(stats.paired_proportion_gate),
    "simulated_operating_characteristic": _plain(stats.simulated_operating_characteristic),
    "operating_characteristic": _plain(stats.operating_characteristic),
    "pass_at_k": _plain(stats.pass_at_k),
    "holm_adjust": _plain(stats.holm_adjust),
    "clustered_mean_se": _plain(stats.clustered_mean_se),
    "hamed_rao_trend": _plain(stats.hamed_rao_trend),
    "planned_paired_sd": _plain(stats.planned_paired_sd),
    "kendall_w": _plain(stats.kendall_w),
    "Rng": _rng,
}

# ---------------------------------------------------------------------------------------------
# Comparison


def _ordered(x: float) -> int:
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF) - 1


def ulp_distance(x: float, y: float) -> float:
    """Distance in ulp between two doubles: 0 for two NaNs or the same infinity, inf when only one
    is NaN or infinite."""
    if math.isnan(x) or math.isnan(y):
        return 0 if math.isnan(x) and math.isnan(y) else math.inf
    if math.isinf(x) or math.isinf(y):
        return 0 if x == y else math.inf
    return abs(_ordered(x) - _ordered(y))


@dataclasses.dataclass
class Diff:
    """Float distances seen while comparing (for the table)."""

    max_abs: float = 0.0
    max_ulp: float = 0


def compare(expected: Any, actual: Any, ulp_tol: float, diff: Diff, path: str = "$") -> list[str]:
    """Mismatches between a decoded TS result and a plain Python result (see the module docs)."""
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        same = type(actual) is type(expected) and actual == expected
        return [] if same else [f"{path}: expected {expected!r}, got {actual!r}"]
    if isinstance(expected, (int, float)):
        if not isinstance(actual, (int, float)) or isinstance(actual, bool):
            return [f"{path}: expected number {expected!r}, got {actual!r}"]
        if isinstance(actual, int):  # a discrete output: exactly equal
            # beyond 2^53 the TS value was a double written in its shortest decimal form
            same = actual == expected or (abs(expected) > 2**53 and float(actual) == float(expected))
            return [] if same else [f"{path}: expected {expected!r}, got {actual!r} (integer)"]
        u = ulp_distance(float(expected), actual)
        if not (math.isnan(expected) or math.isnan(actual) or expected == actual):
            diff.max_abs = max(diff.max_abs, abs(expected - actual))
        diff.max_ulp = max(diff.max_ulp, u)
        return [] if u <= ulp_tol else [f"{path}: expected {expected!r}, got {actual!r} ({u} ulp)"]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected a list of {len(expected)}, got {actual!r}"]
        out: list[str] = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += compare(e, a, ulp_tol, diff, f"{path}[{i}]")
        return out
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or sorted(actual) != sorted(expected):
            keys = sorted(actual) if isinstance(actual, dict) else actual
            return [f"{path}: expected keys {sorted(expected)}, got {keys!r}"]
        out = []
        for k in sorted(expected):
            out += compare(expected[k], actual[k], ulp_tol, diff, f"{path}.{k}")
        return out
    return [f"{path}: unsupported expected value {expected!r}"]


def run_case(python_name: str, case: dict) -> tuple[str, Any]:
    """Runs one (decoded) case: ("ok", plain result) or ("error", (type name, kind, message))."""
    kwargs = {snake_case(k): v for k, v in (case.get("options") or {}).items()}
    try:
        return "ok", to_plain(ADAPTERS[python_name](case["args"], kwargs))
    except (task_rewards.RewardInputError, stats.StatsInputError) as e:
        return "error", (type(e).__name__, e.kind, str(e))
    except Exception as e:  # noqa: BLE001 - any other exception is a parity failure, reported below
        return "error", (type(e).__name__, None, str(e))


def check_case(python_name: str, case: dict, ulp_tol: float, diff: Diff) -> list[str]:
    """Mismatches for one decoded case (empty when the Python port agrees)."""
    status, value = run_case(python_name, case)
    if "error" in case:
        want = (case["error"]["type"], case["error"]["kind"])
        if status == "error" and value[:2] == want:
            return []
        got = f"{value[0]}({value[1]}): {value[2]}" if status == "error" else repr(value)
        return [f"expected {want[0]}({want[1]}), got {got}"]
    if status == "error":
        return [f"raised {value[0]}({value[1]}): {value[2]}"]
    return compare(snake_keys(case["expected"]), value, ulp_tol, diff)


def load(path: Path) -> dict:
    """A vector file, decoded."""
    data = json.loads(path.read_text())
    if data.get("format") != 1:
        raise ValueError(f"{path}: unknown vector format {data.get('format')!r}")
    data["cases"] = [decode(c) for c in data["cases"]]
    return data


# ---------------------------------------------------------------------------------------------
# Curve thresholds (TS agent/report/thresholds.ts -> py_trainer/core/curve_thresholds.json)

REGENERATE = "cd ts_agent && node_modules/.bin/tsx src/parity/vectors.ts --out ../tests/vectors"


def check_curve_thresholds(ts_json: Path, checked_in: Path = curve_thresholds.JSON_PATH) -> list[str]:
    """Problems with the curve thresholds: the checked-in JSON is not byte for byte what TS wrote to
    ``ts_json``, or a py_trainer.core.curve_thresholds constant differs from the TS value."""
    problems: list[str] = []
    if ts_json.read_bytes() != checked_in.read_bytes():
        try:
            shown = checked_in.resolve().relative_to(Path(__file__).resolve().parent.parent)
        except ValueError:
            shown = checked_in
        problems.append(f"{shown} is stale: it is not what ts_agent/src/agent/report/thresholds.ts "
                        f"produces; regenerate it with `{REGENERATE}` and commit it")
    ts_values = json.loads(ts_json.read_text(encoding="utf-8"))
    if curve_thresholds.CURVE_THRESHOLDS != ts_values:
        problems.append(f"curve_thresholds.CURVE_THRESHOLDS = {curve_thresholds.CURVE_THRESHOLDS!r}, TS has {ts_values!r}")
    for key, value in sorted(ts_values.items()):
        name = key.upper()
        if not hasattr(curve_thresholds, name):
            problems.append(f"py_trainer.core.curve_thresholds has no constant {name} for the TS key {key!r}")
            continue
        got = getattr(curve_thresholds, name)
        # equal as numbers (JSON writes 5.0 as 5); step counts are checked to be ints at import
        if isinstance(got, bool) or not isinstance(got, (int, float)) or got != value:
            problems.append(f"curve_thresholds.{name} = {got!r}, TS has {key} = {value!r}")
    return problems


# ---------------------------------------------------------------------------------------------
# The reward half of the verdict (TS verdict/held-out-reward.ts vs the sidecar's summary.json)

SUMMARY_KEYS = {"estimate": "relative_change", "lower": "relative_change_ci_low", "upper": "relative_change_ci_high"}


def check_reward_half(cases_json: Path, diff: Diff) -> tuple[int, list[str]]:
    """(runs compared, problems): each run's TS relative change and CI against its summary.json
    (a field proto JSON omits is 0.0), and the TS resamples against training.BOOTSTRAP_RESAMPLES."""
    from py_trainer.training import skeleton as training

    data = json.loads(cases_json.read_text(encoding="utf-8"))
    problems: list[str] = []
    if data["resamples"] != training.BOOTSTRAP_RESAMPLES:
        problems.append(f"TS HELD_OUT_RESAMPLES = {data['resamples']}, training.BOOTSTRAP_RESAMPLES = {training.BOOTSTRAP_RESAMPLES}")
    compared = 0
    for run in data["runs"]:
        if run["ts"] is None:
            continue
        summary = json.loads(Path(run["summary"]).read_text(encoding="utf-8"))
        expected = decode(run["ts"])
        actual = {k: float(decode(summary.get(key, 0.0))) for k, key in SUMMARY_KEYS.items()}
        compared += 1
        problems += [f"{run['run']}: {p}" for p in compare(expected, actual, 0, diff)]
    return compared, problems


# ---------------------------------------------------------------------------------------------
# Command line


def _files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        out += sorted(p.glob("*.json")) if p.is_dir() else [p]
    return out


def _fmt_ulp(u: float) -> str:
    return "inf" if u == math.inf else str(int(u))


def main(argv: list[str]) -> int:
    argv = list(argv)
    thresholds = None
    if "--thresholds" in argv:
        i = argv.index("--thresholds")
        thresholds = Path(argv[i + 1])
        del argv[i : i + 2]
    reward = None
    if "--reward" in argv:
        i = argv.index("--reward")
        reward = Path(argv[i + 1])
        del argv[i : i + 2]
    files = _files(argv or ["tests/vectors"])
    if not files:
        print("parity: no vector files found", file=sys.stderr)
        return 1
    rows, failures = [], []
    for path in files:
        data = load(path)
        diff = Diff()
        bad = 0
        for case in data["cases"]:
            problems = check_case(data["python"], case, data["tolerance"]["ulp"], diff)
            if problems:
                bad += 1
                if len(failures) < 40:
                    failures.append(f"{data['function']} [{path.parent.name}] {case['name']!r}: " + "; ".join(problems[:3]))
        errors = sum(1 for c in data["cases"] if "error" in c)
        source = data.get("source", path.parent.name)
        result = "ok" if bad == 0 else f"FAIL ({bad})"
        rows.append((data["function"], source, len(data["cases"]), errors, f"{diff.max_abs:.3g}", _fmt_ulp(diff.max_ulp),
                     f"<= {data['tolerance']['ulp']}", result))
    if thresholds is not None:
        problems = check_curve_thresholds(thresholds)
        failures += [f"CURVE_THRESHOLDS: {p}" for p in problems]
        n_keys = len(json.loads(thresholds.read_text(encoding="utf-8")))
        rows.append(("CURVE_THRESHOLDS", "thresholds", n_keys, 0, "0", "0", "<= 0",
                     "ok" if not problems else f"FAIL ({len(problems)})"))
    if reward is not None:
        diff = Diff()
        compared, problems = check_reward_half(reward, diff)
        failures += [f"reward half: {p}" for p in problems]
        rows.append(("reward half (TS verdict vs summary.json)", "run folders", compared, 0, f"{diff.max_abs:.3g}", _fmt_ulp(diff.max_ulp), "<= 0",
                     "ok" if not problems else f"FAIL ({len(problems)})"))
    header = ("function", "source", "cases", "errors", "max abs diff", "max ulp", "tolerance", "result")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("{:<%d}" % w if i < 2 else "{:>%d}" % w for i, w in enumerate(widths))
    print(line.format(*header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line.format(*r))
    total = sum(r[2] for r in rows)
    if failures:
        print(f"\nparity: MISMATCH in {sum(1 for r in rows if r[-1] != 'ok')} of {len(rows)} files:")
        for f in failures:
            print("  " + f)
        return 1
    print(f"\nparity: {total} cases in {len(rows)} files, Python ports agree with TypeScript")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
