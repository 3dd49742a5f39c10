"""The sidecar's fork server (py_trainer/runs/forkserver.py): a forked worker is `python -m MODULE ARGS`
in what it sees (environment, argv, stdio, exit code, process title, threads), dies with the fork
server, and the fork server refuses when forking would not be safe."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from _sidecar import wait_for
from py_trainer.runs.forkserver import PIPE, ForkServer, ForkServerUnavailable
from py_trainer.runs.forkserver_process import exit_code

pytestmark = pytest.mark.slow  # it starts a fork server process and forks children

TESTS = str(Path(__file__).parent)


@pytest.fixture
def env(monkeypatch):
    """The fork server finds forkserver_child (this folder) on its path."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")]))
    return dict(os.environ)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=120))


def test_a_forked_child_sees_exactly_what_python_dash_m_would(tmp_path, env):
    async def go():
        forks = ForkServer()
        out = open(tmp_path / "out.log", "wb")
        err = open(tmp_path / "err.log", "wb")
        child_env = {**env, "OMP_NUM_THREADS": "1", "ONLY_HERE": "yes"}
        child_env.pop("HOME", None)
        child = await forks.spawn("forkserver_child", ["report", "--x", "1"], env=child_env, stdout=out, stderr=err,
                                  title=f"{sys.executable} -m forkserver_child report --x 1", preload=["torch"])
        rc = await child.wait()
        await forks.close()
        return rc, child_env

    rc, child_env = run(go())
    assert rc == 0
    seen = json.loads((tmp_path / "out.log").read_text())
    assert seen["env"] == child_env  # exactly the env given: nothing of the fork server's own added or kept
    assert seen["argv"] == ["report", "--x", "1"] and seen["name"] == "__main__"
    assert seen["cwd"] == os.getcwd()
    assert seen["threads"] == 1  # OMP_NUM_THREADS applied though torch was loaded with another value
    assert (tmp_path / "err.log").read_text() == "to stderr\n"


def test_exit_codes_are_those_of_the_command(tmp_path, env):
    async def go():
        forks = ForkServer()
        codes = {}
        for name, args in {"exit 3": ["exit", "3"], "raise": ["raise"], "return": ["report"]}.items():
            with open(tmp_path / f"{name}.log", "wb") as log:
                child = await forks.spawn("forkserver_child", args, env=env, stdout=log, stderr=log)
            codes[name] = await child.wait()
        with open(tmp_path / "sleep.log", "wb") as log:
            child = await forks.spawn("forkserver_child", ["sleep"], env=env, stdout=log, stderr=log,
                                      title="python -m forkserver_child sleep marker-7f3a")
        await asyncio.sleep(0)
        deadline = time.monotonic() + 30
        while b"sleeping" not in (tmp_path / "sleep.log").read_bytes():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        cmdline = Path(f"/proc/{child.pid}/cmdline").read_bytes()
        child.send_signal(signal.SIGTERM)
        codes["SIGTERM"] = await child.wait()
        child.kill()  # after its end: a no-op, never a signal to whatever reuses the pid
        await forks.close()
        return codes, cmdline

    codes, cmdline = run(go())
    assert codes == {"exit 3": 3, "raise": 1, "return": 0, "SIGTERM": -signal.SIGTERM}
    assert b"ValueError: boom from the child" in (tmp_path / "raise.log").read_bytes()
    assert b"marker-7f3a" in cmdline  # ps and pgrep -f show the command, not the fork server's
    assert exit_code(SystemExit("a message")) == 1 and exit_code(SystemExit(None)) == 0


def test_pipes_carry_stdin_and_stdout(env):
    async def go():
        forks = ForkServer()
        child = await forks.spawn("forkserver_child", ["echo"], env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE)
        child.stdin.write(b"hello\n")
        await child.stdin.drain()
        line = await child.stdout.readline()
        child.stdin.close()
        rc = await child.wait()
        await forks.close()
        return line, rc

    assert run(go()) == (b"HELLO\n", 0)


def test_children_die_with_the_fork_server(tmp_path, env):
    async def go():
        forks = ForkServer()
        with open(tmp_path / "sleep.log", "wb") as log:
            child = await forks.spawn("forkserver_child", ["sleep"], env=env, stdout=log, stderr=log)
        server_pid = forks._proc.pid
        os.kill(server_pid, signal.SIGKILL)  # what a kill -9 of the sidecar does to it (PR_SET_PDEATHSIG)
        rc = await child.wait()
        return child.pid, rc

    pid, rc = run(go())
    assert rc == -signal.SIGKILL
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3],
             timeout=30)


def test_a_preload_that_starts_a_thread_is_refused(tmp_path, env):
    async def go():
        forks = ForkServer()
        with open(tmp_path / "first.log", "wb") as log:  # forks while nothing unsafe was imported
            first = await forks.spawn("forkserver_child", ["exit", "0"], env=env, stdout=log, stderr=log)
        assert await first.wait() == 0 and forks.refused == ""
        with pytest.raises(ForkServerUnavailable, match="started threads"):
            await forks.spawn("forkserver_child", ["report"], env=env, preload=["forkserver_thread"])
        # from then on the caller is told to start its workers itself
        assert await forks.spawn_or_none("forkserver_child", ["report"], env=env) is None
        return forks.refused

    assert "started threads" in run(go())
