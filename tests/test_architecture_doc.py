"""docs/architecture.md names every module (issue 26 item 5).

The rule: a module is named when docs/architecture.md holds, inside backticks, its path relative
to its package root (``py_trainer/py_trainer/`` or ``ts_agent/src/``, e.g. ``agent/core/eval-log.ts``,
``stats/paired.py``), or its bare file name (``eval-log.ts``, ``paired.py``), or a folder above it
ending in "/" that opens a table cell (``| `agent/report/` | ...``, ``| | `stats/`: ...``): that row
then speaks for every file in the folder.
Generated code (``gen/``) and ``__init__.py`` / ``__main__.py`` are left out.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = [(ROOT / "py_trainer" / "py_trainer", ".py"), (ROOT / "ts_agent" / "src", ".ts")]


def _named() -> set[str]:
    """Every backticked file name or path of the doc (outside the diagram), and the folders that
    open a table cell (a folder named in running text, such as `agent/`, speaks for nothing)."""
    text = re.sub(r"```.*?```", "", DOC.read_text(encoding="utf-8"), flags=re.S)  # the diagram
    out: set[str] = set()
    for quoted in re.findall(r"`([^`]+)`", text):
        out.update(t for t in re.findall(r"[\w./-]+", quoted) if not t.endswith("/"))
    for line in text.splitlines():
        if line.startswith("|"):
            for cell in line.strip("|").split("|"):
                m = re.match(r"\s*`([\w./-]+/)`", cell)
                if m:
                    out.add(m.group(1))
    return out


def _unnamed(package: Path, ext: str, named: set[str]) -> list[str]:
    missing = []
    for f in sorted(package.rglob(f"*{ext}")):
        rel = f.relative_to(package)
        if rel.parts[0] == "gen" or f.name in ("__init__.py", "__main__.py"):
            continue
        folders = {"/".join(rel.parts[:i]) + "/" for i in range(1, len(rel.parts))}
        if str(rel) in named or f.name in named or folders & named:
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
    assert _unnamed(pkg, ".py", {"named.py", "stats/"}) == ["unnamed.py"]
