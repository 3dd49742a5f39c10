"""The code revision every log carries (py_trainer/core/code_revision.py): the commit read from .git
without a git binary, the dirty flag, and the grader hash that changes when a grader file does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from py_trainer.core import code_revision as cr

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


def test_grader_hash_changes_with_any_grader_file(tmp_path):
    for name in cr.GRADER_FILES:
        shutil.copy(cr.PACKAGE_DIR / name, tmp_path / name)
    before = cr.grader_sha256(tmp_path)
    assert before == cr.grader_sha256(cr.PACKAGE_DIR)
    for name in cr.GRADER_FILES:
        original = (tmp_path / name).read_bytes()
        (tmp_path / name).write_bytes(original + b"\n")
        assert cr.grader_sha256(tmp_path) != before, name
        (tmp_path / name).write_bytes(original)
    assert cr.grader_sha256(tmp_path) == before


def _git_dir(tmp_path: Path, head: str) -> Path:
    g = tmp_path / ".git"
    (g / "refs" / "heads").mkdir(parents=True)
    (g / "HEAD").write_text(head + "\n")
    return g


def test_head_commit_reads_a_loose_ref_packed_refs_and_a_detached_head(tmp_path):
    g = _git_dir(tmp_path, "ref: refs/heads/main")
    assert cr.head_commit(g) == ""  # an unborn branch
    (g / "packed-refs").write_text(f"# pack-refs with: peeled\n{COMMIT_B} refs/heads/main\n")
    assert cr.head_commit(g) == COMMIT_B
    (g / "refs" / "heads" / "main").write_text(COMMIT_A + "\n")
    assert cr.head_commit(g) == COMMIT_A  # a loose ref wins over packed-refs
    (g / "HEAD").write_text(COMMIT_B + "\n")
    assert cr.head_commit(g) == COMMIT_B


def test_find_checkout_follows_a_worktree_file(tmp_path):
    real = _git_dir(tmp_path / "main", "ref: refs/heads/main")
    wt = tmp_path / "wt" / "sub"
    wt.mkdir(parents=True)
    (tmp_path / "wt" / ".git").write_text(f"gitdir: {real}\n")
    assert cr.find_checkout(wt) == (tmp_path / "wt", real.resolve())
    assert cr.find_checkout(Path("/")) is None


def test_this_checkout_names_its_commit_and_grader():
    rev = cr.find_checkout(cr.PACKAGE_DIR)
    assert rev is not None  # the tests run from the repository
    commit = cr.head_commit(rev[1])
    assert len(commit) == 40 and int(commit, 16) >= 0


@pytest.mark.slow
def test_dirty_flag_follows_tracked_changes(tmp_path):
    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "f.txt").write_text("one\n")
    run("add", "f.txt")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    assert cr.is_dirty(tmp_path) is False
    (tmp_path / "untracked.txt").write_text("x")
    assert cr.is_dirty(tmp_path) is False  # untracked files do not make a record dirty
    (tmp_path / "f.txt").write_text("two\n")
    assert cr.is_dirty(tmp_path) is True
