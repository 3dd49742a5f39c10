"""The house rules, checked rather than hoped for.

- the package is sub-packages only, one per floor; every floor sits on the "py_trainer floors"
  layers contract in py_trainer/pyproject.toml and has a contract of its own ("py_trainer.<floor>
  rooms") on which each of its modules sits (`make test` runs `lint-imports`, which fails on a
  layer break or a circle: grimp sees function-level imports too), so a new module must be placed;
- no `_private` name is imported from another module (a name another file needs is public);
- no library file grows past 500 lines, generated code aside (the statistics are one file per
  family in core/stats/, the rewards' advantages in core/advantage.py, as in the TS core; each under the cap).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "py_trainer" / "py_trainer"
MAX_LINES = 500


def floors() -> list[str]:
    """The package's sub-packages (each is one floor); gen/ is generated."""
    return sorted(p.parent.name for p in PKG.glob("*/__init__.py") if p.parent.name != "gen")


def rooms(floor: str) -> set[str]:
    """A floor's modules and sub-packages (a sub-package sits in one room as a whole)."""
    folder = PKG / floor
    return ({p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
            | {p.parent.name for p in folder.glob("*/__init__.py")})


def library_files() -> list[Path]:
    return [p for p in PKG.rglob("*.py") if "gen" not in p.relative_to(PKG).parts]


def contracts() -> dict[str, dict]:
    cfg = tomllib.loads((REPO / "py_trainer" / "pyproject.toml").read_text())
    return {c["name"]: c for c in cfg["tool"]["importlinter"]["contracts"]}


def placed(contract: dict) -> list[str]:
    return [part.strip().removeprefix("py_trainer.") for layer in contract["layers"] for part in layer.split("|")]


def test_the_package_holds_only_floors():
    loose = sorted(p.name for p in PKG.glob("*.py") if p.name != "__init__.py")
    assert loose == [], "a module outside every floor: put it in the sub-package of its floor"


def test_every_floor_is_placed_and_has_its_own_contract():
    on_floors = placed(contracts()["py_trainer floors"])
    assert len(on_floors) == len(set(on_floors)), "a floor is placed twice"
    assert set(floors()) == set(on_floors)
    for floor in floors():
        contract = contracts().get(f"py_trainer.{floor} rooms")
        assert contract is not None, f"py_trainer.{floor} has no contract of its own"
        assert contract["containers"] == [f"py_trainer.{floor}"]
        in_rooms = placed(contract)
        assert len(in_rooms) == len(set(in_rooms)), f"{floor}: a module is in two rooms"
        assert rooms(floor) == set(in_rooms), (
            f"{floor}: not placed: {sorted(rooms(floor) - set(in_rooms))}; "
            f"placed but missing: {sorted(set(in_rooms) - rooms(floor))}")


@pytest.mark.slow
def test_layers_contract_holds():
    proc = subprocess.run([str(Path(sys.executable).with_name("lint-imports"))], cwd=REPO / "py_trainer",
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("module, upward, broken", [
    ("core/errors.py", "from py_trainer.server import cli", "py_trainer floors"),
    ("runs/events.py", "from py_trainer.runs import registry", "py_trainer.runs rooms"),
])
def test_an_upward_import_breaks_a_contract(tmp_path, module, upward, broken):
    """A copy of the package with one upward import: lint-imports fails and names the contract."""
    shutil.copytree(PKG, tmp_path / "py_trainer", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "py_trainer" / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "py_trainer" / module
    target.write_text(target.read_text() + f"\n{upward}  # noqa\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"], cwd=tmp_path,
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert f"{broken} BROKEN" in proc.stdout


def private_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("py_trainer"):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno} imports {node.module}.{alias.name}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.startswith("_") \
                and not node.attr.startswith("__") and node.value.id in {"stats", "task_rewards", "config", "runs", "models"}:
            bad.append(f"{path.relative_to(REPO)}:{node.lineno} uses {node.value.id}.{node.attr}")
    return bad


def test_no_private_name_is_imported_across_modules():
    files = [*library_files(), *(REPO / "scripts").glob("*.py"), *(REPO / "tests").glob("*.py")]
    bad = [b for f in files if f.name != "test_architecture.py" for b in private_imports(f)]
    assert bad == []


def test_private_import_check_can_fail(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("from py_trainer.core.config import _num\nfrom py_trainer import stats\nstats._sum([1])\n")
    f = f.rename(REPO / "tests" / f"_tmp_arch_{tmp_path.name}.py")
    try:
        assert len(private_imports(f)) == 2
    finally:
        f.unlink()


def test_no_library_file_is_too_long():
    long = {p.relative_to(PKG).as_posix(): n for p in library_files() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_modes_a_request_may_name_are_the_modes_the_worker_trains():
    from py_trainer.server import validate
    from py_trainer.workers import train_worker as worker

    assert set(validate.MODE_CHECKS) == set(worker.MODES)
