"""Issue 32, item 8: `agent runs` showed "cancelled; worker exited with -10". -10 is SIGUSR1, the
cancel signal (launch.ask_to_stop), arriving while the worker was still importing torch/TRL,
before main() installed its handler: SIGUSR1's default action killed it. The worker now ignores
SIGUSR1 from its first line until the handler is in place (the cancel file carries the request)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from _sidecar import REPO

pytestmark = pytest.mark.slow  # starts the worker module as a process


def test_a_cancel_while_the_worker_imports_does_not_kill_it():
    proc = subprocess.Popen([sys.executable, "-m", "py_trainer.worker", "--help"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.3)  # inside the imports (torch alone takes seconds here)
    assert proc.poll() is None, "the worker finished before the signal: the test cannot tell"
    proc.send_signal(signal.SIGUSR1)
    rc = proc.wait(timeout=120)
    assert rc == 0, f"exit {rc}: {proc.stderr.read().decode()[-500:]}"
