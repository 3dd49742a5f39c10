"""docs/architecture.md names every module (issue 26 item 5).

The rule: a module is named when docs/architecture.md holds, inside backticks, its path relative
to its package root (``py_trainer/py_trainer/`` or ``ts_agent/src/``, e.g. ``agent/core/eval-log.ts``,
``stats/paired.py``), or its bare file name (``eval-log.ts``, ``paired.py``). A folder does not
speak for its files: a floor's row (``| `runs/` (a run's life) | ...``) let a new module in it go
unnamed (issue 52: ``core/cpu_env.py``, ``parity/random.ts``, ``commands/delete.ts``).
Generated code (``gen/``) and ``__init__.py`` / ``__main__.py`` are left out.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = [(ROOT / "py_trainer" / "py_trainer", ".py"), (ROOT / "ts_agent" / "src", ".ts")]


def _named() -> set[str]:
    """Every backticked file name or path of the doc, outside the diagram (a folder names nothing)."""
    text = re.sub(r"```.*?```", "", DOC.read_text(encoding="utf-8"), flags=re.S)  # the diagram
    out: set[str] = set()
    for quoted in re.findall(r"`([^`]+)`", text):
        out.update(t for t in re.findall(r"[\w./-]+", quoted) if not t.endswith("/"))
    return out


def _unnamed(package: Path, ext: str, named: set[str]) -> list[str]:
    missing = []
    for f in sorted(package.rglob(f"*{ext}")):
        rel = f.relative_to(package)
        if rel.parts[0] == "gen" or f.name in ("__init__.py", "__main__.py"):
            continue
        if str(rel) in named or f.name in named:
            continue
        missing.append(str(rel))
    return missing


def test_every_module_has_a_row_in_architecture_md():
    named = _named()
    missing = {str(pkg.relative_to(ROOT)): _unnamed(pkg, ext, named) for pkg, ext in PACKAGES}
    assert not any(missing.values()), f"docs/architecture.md names no row for: {missing}"


def test_the_rule_sees_a_missing_module(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "stats").mkdir(parents=True)
    for name in ("named.py", "unnamed.py", "stats/paired.py"):
        (pkg / name).write_text("")
    assert _unnamed(pkg, ".py", {"named.py", "stats/paired.py"}) == ["unnamed.py"]
    assert _unnamed(pkg, ".py", {"named.py", "unnamed.py"}) == ["stats/paired.py"]  # no folder rule


def test_a_folder_row_names_none_of_its_files(tmp_path, monkeypatch):
    doc = tmp_path / "architecture.md"
    doc.write_text("| floor | module |\n|---|---|\n| `runs/` (a run's life) | `runs/registry.py`: runs |\n")
    monkeypatch.setitem(globals(), "DOC", doc)
    assert _named() == {"runs/registry.py"}


def _stale(named: set[str]) -> list[str]:
    """Backticked .py / .ts names that are no file: a module deleted or renamed while the doc still
    describes it. A path may be relative to a package root, to `agent/`, or to the repository."""
    roots = [pkg for pkg, _ in PACKAGES] + [ROOT / "ts_agent" / "src" / "agent", ROOT, ROOT / "ts_agent", ROOT / "py_trainer"]
    files = {f.name for pkg, ext in PACKAGES for f in pkg.rglob(f"*{ext}")}
    modules = (n for n in named if n.endswith((".py", ".ts")) and not n.startswith("."))  # ".agent.ts": a kind
    return sorted(n for n in modules if n not in files and not any((r / n).is_file() for r in roots))


def test_architecture_md_names_no_module_that_is_gone():
    stale = _stale(_named())
    assert not stale, f"docs/architecture.md names modules that do not exist: {stale}"
    assert _stale({"agent/agent-task/episode-eval.ts", "episodes-report.ts"}) == ["agent/agent-task/episode-eval.ts", "episodes-report.ts"]
