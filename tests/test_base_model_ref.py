"""A request's `base_model` is sorted once (core.model_files.parse_base_model) into a BaseModelRef,
and no other module sorts the string itself: the "embedded:" prefix and the ".gguf" suffix are
written in one file."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from py_trainer.core.model_files import BaseModelRef, parse_base_model

PKG = Path(__file__).resolve().parents[1] / "py_trainer" / "py_trainer"


def test_each_kind(tmp_path):
    (tmp_path / "local").mkdir()
    cases = {
        "": ("default", ""),
        "embedded:tasks/t.jsonl": ("embedded", "tasks/t.jsonl"),
        "smollm2-135m-instruct": ("gguf", ""),
        "models/m.GGUF": ("gguf", "models/m.GGUF"),
        "./m": ("folder", "./m"),
        "/models/local": ("folder", "/models/local"),
        "~/m": ("folder", "~/m"),
        "local": ("folder", "local"),
        "Qwen/Qwen2.5-0.5B": ("hub", "Qwen/Qwen2.5-0.5B"),
    }
    for text, (kind, path) in cases.items():
        ref = parse_base_model(text, tmp_path)
        assert (ref.text, ref.kind, ref.path) == (text, kind, path), text
    assert parse_base_model("smollm2-135m-instruct", tmp_path).packaged
    assert not parse_base_model("models/m.gguf", tmp_path).packaged
    assert parse_base_model("", tmp_path).built_here and parse_base_model("embedded:t", tmp_path).built_here
    assert not parse_base_model("models/m.gguf", tmp_path).built_here


def test_a_ref_is_a_frozen_value(tmp_path):
    ref = parse_base_model("Qwen/Qwen2.5-0.5B", tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.kind = "folder"  # type: ignore[misc]
    assert ref == BaseModelRef("Qwen/Qwen2.5-0.5B", "hub", "Qwen/Qwen2.5-0.5B")
    assert parse_base_model(ref, tmp_path) is ref  # a parsed value passes through


def test_only_the_parser_sorts_base_model_strings():
    sorting = re.compile(r'"embedded:"|startswith\(EMBEDDED_PREFIX\)|GGUF_SUFFIX|\.endswith\("\.gguf"\)')
    offenders = [f"{p.relative_to(PKG)}:{n}" for p in PKG.rglob("*.py") if "gen" not in p.parts
                 and p.name != "model_files.py"
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if sorting.search(line.split("#", 1)[0]) and not line.lstrip().startswith(('"', "-", "`"))]
    assert offenders == []
