"""Which code produced a record: the package version, the git commit and a dirty flag of the
checkout the package runs from, and a hash of the grader/reward code (inspect_ai's EvalLog carries
the revision; nanochat's report header the commit and a dirty flag).

summary.json and every Evaluate fingerprint carry it, so a baseline made before a grader change is
told apart from an eval made after it (the agent gates on the grader hash; docs/verdict.md).

- ``git_commit`` is read from the .git folder itself (HEAD, a loose ref or packed-refs), so no git
  binary is needed; "" when the package does not run from a git checkout.
- ``git_dirty`` asks ``git status --porcelain --untracked-files=no`` once per process; False when
  there is no checkout or no git binary (the record then has no commit either).
- ``grader_sha256`` hashes the files that decide a score, in a fixed order, as the lines
  "<name> <sha256>\\n": task_rewards.py (with answer_text.py and answer_forms.py), rewards.py and
  the checked-in char_classes.json.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
GRADER_FILES = ("task_rewards.py", "answer_text.py", "answer_forms.py", "rewards.py", "char_classes.json")


def grader_sha256(package_dir: Path = PACKAGE_DIR) -> str:
    """sha256 of the lines "<file> <sha256 of its bytes>\\n" over GRADER_FILES, in that order."""
    lines = [f"{name} {hashlib.sha256((package_dir / name).read_bytes()).hexdigest()}\n" for name in GRADER_FILES]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def find_checkout(start: Path) -> tuple[Path, Path] | None:
    """(checkout folder, its .git folder) holding `start`; a worktree's .git file is followed."""
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return folder, dot_git
        if dot_git.is_file():
            text = dot_git.read_text(errors="replace").strip()
            if text.startswith("gitdir:"):
                return folder, (folder / text.removeprefix("gitdir:").strip()).resolve()
    return None


def head_commit(git_dir: Path) -> str:
    """The commit HEAD names: a detached hash, a loose ref, or a line of packed-refs; "" if unknown."""
    try:
        head = (git_dir / "HEAD").read_text().strip()
    except OSError:
        return ""
    if not head.startswith("ref:"):
        return head
    ref = head.removeprefix("ref:").strip()
    # A linked worktree keeps refs in the common dir.
    common = git_dir
    if (git_dir / "commondir").is_file():
        common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
    for base in (git_dir, common):
        loose = base / ref
        if loose.is_file():
            return loose.read_text().strip()
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref:
                return parts[0]
    return ""


def is_dirty(checkout: Path) -> bool:
    """Tracked files differ from HEAD (`git status --porcelain --untracked-files=no`); False when git
    cannot tell (no binary, a timeout)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=checkout,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() != ""


@functools.lru_cache(maxsize=1)
def code_revision() -> dict:
    """{package_version, git_commit, git_dirty, grader_sha256} of the running package (once per process)."""
    try:
        package_version = version("py-trainer")
    except PackageNotFoundError:
        package_version = ""
    found = find_checkout(PACKAGE_DIR)
    commit = head_commit(found[1]) if found is not None else ""
    return {
        "package_version": package_version,
        "git_commit": commit,
        "git_dirty": bool(commit) and is_dirty(found[0]),
        "grader_sha256": grader_sha256(),
    }
