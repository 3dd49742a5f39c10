"""The house rules, checked rather than hoped for.

- every module of the package sits on one floor of the import-linter layers contract in
  py_trainer/pyproject.toml (`make test` runs `lint-imports`, which fails on a layer break or a
  circle: grimp sees function-level imports too), so a new module must be placed;
- no `_private` name is imported from another module (a name another file needs is public);
- no library file grows past ~500 lines, generated code aside (the statistics are one file per
  family in stats/, the rewards' advantages in advantage.py, as in the TS core; each under the cap).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "py_trainer" / "py_trainer"
MAX_LINES = 520


def package_modules() -> set[str]:
    """Top-level modules and sub-packages (a sub-package sits on one floor as a whole); gen/ is generated."""
    return ({p.stem for p in PKG.glob("*.py") if p.stem != "__init__"}
            | {p.parent.name for p in PKG.glob("*/__init__.py") if p.parent.name != "gen"})


def library_files() -> list[Path]:
    return [p for p in PKG.rglob("*.py") if "gen" not in p.relative_to(PKG).parts]


def layer_modules() -> list[str]:
    cfg = tomllib.loads((REPO / "py_trainer" / "pyproject.toml").read_text())
    (contract,) = [c for c in cfg["tool"]["importlinter"]["contracts"] if c["name"] == "py_trainer layers"]
    out = []
    for layer in contract["layers"]:
        for part in layer.replace(":", "|").split("|"):
            out.append(part.strip().removeprefix("py_trainer."))
    return out


def test_every_module_is_on_a_floor():
    placed = layer_modules()
    assert len(placed) == len(set(placed)), "a module is on two floors"
    assert package_modules() == set(placed), (
        f"not placed: {sorted(package_modules() - set(placed))}; "
        f"placed but missing: {sorted(set(placed) - package_modules())}")


@pytest.mark.slow
def test_layers_contract_holds():
    proc = subprocess.run([str(Path(sys.executable).with_name("lint-imports"))], cwd=REPO / "py_trainer",
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


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
    f.write_text("from py_trainer.config import _num\nfrom py_trainer import stats\nstats._sum([1])\n")
    f = f.rename(REPO / "tests" / f"_tmp_arch_{tmp_path.name}.py")
    try:
        assert len(private_imports(f)) == 2
    finally:
        f.unlink()


def test_no_library_file_is_too_long():
    long = {p.relative_to(PKG).as_posix(): n for p in library_files() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_modes_a_request_may_name_are_the_modes_the_worker_trains():
    from py_trainer import validate, worker

    assert set(validate.MODE_CHECKS) == set(worker.MODES)
