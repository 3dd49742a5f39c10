"""A mistyped base model is one line up front, with or without HF_HUB_OFFLINE=1 (issue 45 items 4
and 6): a hub id not in the local cache is asked of the hub once (no retries), so a machine without
the hub, or a name the hub does not have, is refused before a run is created; a name near a
packaged short name says which.

Unit tier: the hub is a closed port or a local HTTP server in a thread; the CLI cases (slow) run
`py-trainer train` with HF_HUB_OFFLINE unset and the hub unreachable."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading

import pytest

from _sidecar import REPO
from py_trainer.core.errors import NotFound
from py_trainer.models.base_models import check_base_model

TYPO = "smollm2-135m-instruc"


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def online(monkeypatch):
    """HF_HUB_OFFLINE unset for this process's checks (conftest sets it for every test)."""
    import huggingface_hub.constants

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)


@pytest.mark.parametrize("offline", [True, False])
def test_a_mistyped_packaged_name_says_did_you_mean_with_or_without_the_hub(monkeypatch, tmp_path, online, offline):
    monkeypatch.setenv("HF_ENDPOINT", closed_port())
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(NotFound) as got:
        check_base_model(TYPO, tmp_path)
    assert got.value.field == "base_model"
    assert got.value.message.endswith("(did you mean smollm2-135m-instruct?)"), got.value.message
    assert ("hub is offline" if offline else "the hub cannot be reached") in got.value.message


def test_an_uncached_hub_id_with_the_hub_unreachable_is_refused_up_front(monkeypatch, tmp_path, online):
    monkeypatch.setenv("HF_ENDPOINT", closed_port())
    with pytest.raises(NotFound) as got:
        check_base_model("no-such-org/no-such-model", tmp_path)
    assert "'no-such-org/no-such-model' is not in the local model cache and the hub cannot be reached" in str(got.value)
    assert "did you mean" not in str(got.value)


class _Hub(http.server.BaseHTTPRequestHandler):
    """Answers a HEAD for a config.json as the hub does to a client without a token: 401 with
    X-Error-Code RepoNotFound for a repository it does not have (or a private one), 200 for ok/model."""

    def do_HEAD(self):  # noqa: N802 (the http.server name)
        if self.path.startswith("/ok/model/"):
            self.send_response(200)
            self.send_header("ETag", '"abc"')
            self.send_header("X-Repo-Commit", "0" * 40)
            self.send_header("Content-Length", "2")
        else:
            self.send_response(401)
            self.send_header("X-Error-Code", "RepoNotFound")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hub(monkeypatch, online):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    yield
    server.shutdown()


def test_a_hub_id_the_hub_does_not_have_is_not_found_and_one_it_has_passes(tmp_path, hub):
    with pytest.raises(NotFound) as got:
        check_base_model("no-such-org/no-such-model", tmp_path)
    assert got.value.message == ("'no-such-org/no-such-model' is not a model on the hub (or a private one and no "
                                 "HF_TOKEN is set), nor in the local model cache")
    check_base_model("ok/model", tmp_path)  # the hub has it: left to the load


@pytest.mark.slow
@pytest.mark.parametrize("offline", [True, False])
@pytest.mark.parametrize("name", [TYPO, "no-such-org/no-such-model"])
def test_py_trainer_train_with_a_mistyped_base_model_is_one_line_exit_2(tmp_path, name, offline):
    (tmp_path / "c.yaml").write_text(f"base_model: {name}\ndataset:\n  inline: {{rows: [{{prompt: p, answers: [a]}}, "
                                     "{prompt: q, answers: [b]}, {prompt: r, answers: [c]}]}\n"
                                     "grpo: {max_steps: 1}\nheld_out: {num_prompts: 1}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_ENDPOINT"] = closed_port()
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "train", "--config", str(tmp_path / "c.yaml"),
                           "--runs-root", str(tmp_path / "runs"), "--data-root", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout + proc.stderr
    assert lines[0].startswith(f"py-trainer train: base_model: '{name}' is not"), lines[0]
    assert ("did you mean smollm2-135m-instruct?" in lines[0]) == (name == TYPO)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
