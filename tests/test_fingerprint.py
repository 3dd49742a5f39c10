"""The weights half of an eval's fingerprint (issue 21): what is hashed, and that it is hashed once."""

from __future__ import annotations

import hashlib

from py_trainer.runs import artifacts

from py_trainer.models import loading as models


def test_weights_sha256_covers_the_weight_files_only_in_name_order(tmp_path):
    (tmp_path / "model-00002.safetensors").write_bytes(b"two")
    (tmp_path / "model-00001.safetensors").write_bytes(b"one")
    (tmp_path / "config.json").write_text("{}")  # not a weight file
    lines = "".join(f"{n} {hashlib.sha256(b).hexdigest()}\n"
                    for n, b in (("model-00001.safetensors", b"one"), ("model-00002.safetensors", b"two")))
    assert models.weights_sha256(tmp_path) == hashlib.sha256(lines.encode()).hexdigest()
    (tmp_path / "config.json").write_text('{"x": 1}')
    assert models.weights_sha256(tmp_path) == hashlib.sha256(lines.encode()).hexdigest()
    (tmp_path / "model-00002.safetensors").write_bytes(b"changed")
    assert models.weights_sha256(tmp_path) != hashlib.sha256(lines.encode()).hexdigest()


def test_an_empty_folder_has_no_weights_sha(tmp_path):
    assert models.weights_sha256(tmp_path) == ""


def test_a_file_is_hashed_once_per_size_and_mtime(tmp_path, monkeypatch):
    (tmp_path / "model.safetensors").write_bytes(b"w" * 1000)
    reads = []
    real = artifacts.sha256_of
    monkeypatch.setattr(artifacts, "sha256_of", lambda p: reads.append(p) or real(p))
    first = models.weights_sha256(tmp_path)
    assert models.weights_sha256(tmp_path) == first and len(reads) == 1


def test_a_hub_blob_is_named_by_its_sha256_and_not_re_read(tmp_path, monkeypatch):
    digest = "ab" * 32  # not the content's hash: proves the name is used, not the bytes
    blobs, snap = tmp_path / "blobs", tmp_path / "snapshots" / ("c0" * 20)
    blobs.mkdir()
    snap.mkdir(parents=True)
    (blobs / digest).write_bytes(b"weights")
    (snap / "model.safetensors").symlink_to(blobs / digest)
    monkeypatch.setattr(artifacts, "sha256_of", lambda p: (_ for _ in ()).throw(AssertionError(f"read {p}")))
    assert models.file_sha256(snap / "model.safetensors") == digest


def test_an_adapter_sha_is_its_weights_file(tmp_path):
    (tmp_path / "adapter_config.json").write_text("{}")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"lora")
    assert models.adapter_sha256(tmp_path) == hashlib.sha256(b"lora").hexdigest()
