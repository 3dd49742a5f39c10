"""config.py's knob tables are the one source of defaults, ranges and help.

- each knob's proto comment states the default the table holds ("Default: ..."), so the contract
  a client reads and the validator the sidecar runs cannot drift apart;
- `py-trainer defaults` prints every knob;
- the validators built from the tables fill every default and name the field as the user wrote it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from py_trainer.core import config
from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

REPO = Path(__file__).resolve().parents[1]
PROTO = REPO / "proto" / "grpo" / "trainer" / "v1" / "trainer_service.proto"


def field_comments(proto_text: str) -> dict[tuple[str, str], str]:
    """(message, field) -> the comment lines right above the field, joined."""
    out: dict[tuple[str, str], str] = {}
    message, comment = None, []
    for raw in proto_text.splitlines():
        line = raw.strip()
        if m := re.match(r"^message (\w+) \{$", line):
            message, comment = m.group(1), []
        elif line == "}":
            message, comment = None, []
        elif line.startswith("//"):
            comment.append(line[2:].strip())
        elif message and (m := re.match(r"^(?:optional |repeated )?[\w.]+ (\w+) = \d+;$", line)):
            out[(message, m.group(1))] = " ".join(comment)
            comment = []
        else:
            comment = []
    return out


def test_every_knob_states_its_default_in_the_proto():
    comments = field_comments(PROTO.read_text())
    missing = []
    for message, (table, pref) in config.TABLES.items():
        for name, knob in table.items():
            want = config.default_text(knob, pref.get(name), name in pref)
            got = comments.get((message, name))
            if got is None or want not in got:
                missing.append(f"{message}.{name}: want {want!r} in {got!r}")
    assert missing == []


def test_the_proto_check_can_fail():
    text = PROTO.read_text().replace("Default: 8", "Default: 9", 1)
    comments = field_comments(text)
    knob = config.GRPO["num_generations"]
    assert config.default_text(knob) not in comments[("GrpoConfig", "num_generations")]


def test_table_fields_exist_in_their_messages():
    for message, (table, pref) in config.TABLES.items():
        fields = getattr(pb, message).DESCRIPTOR.fields_by_name
        assert set(table) <= set(fields), message
        assert set(pref) <= set(table), message


@pytest.mark.slow
def test_defaults_command_prints_every_knob():
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "defaults"], capture_output=True, text=True,
                          check=True)
    text = proc.stdout
    for message, (table, _) in config.TABLES.items():
        assert f"{message}:" in text
        section = text.split(f"{message}:\n", 1)[1].split("\n\n", 1)[0].split(":\n", 1)[0]
        for name, knob in table.items():
            line = next(l for l in section.splitlines() if l.strip().startswith(name + " "))
            assert knob.help in line and config.render_default(knob.default) in line if knob.default is not None \
                else knob.help in line


def test_fill_and_check_name_the_field_with_its_prefix():
    g = pb.GrpoConfig(num_generations=1)
    config.fill_defaults(g, config.GRPO)
    assert g.beta == pytest.approx(0.04) and g.loss_type == "dapo"
    with pytest.raises(InvalidArgument) as ei:
        config.check_knobs(g, config.GRPO, "grpo.")
    assert str(ei.value) == "grpo.num_generations: must be in [2, 256] (GRPO needs a group), got 1"
    s = pb.SampleGroupsRequest(temperature=float("nan"))
    with pytest.raises(InvalidArgument) as ei:
        config.check_knobs(s, config.SAMPLE, "")
    assert str(ei.value) == "temperature: must be a finite number, got nan"


def test_preference_mode_takes_its_own_schedule_defaults():
    g = pb.GrpoConfig()
    config.check_schedule(g, config.PREFERENCE_SCHEDULE_DEFAULTS)
    assert (g.learning_rate, g.max_steps, g.logging_steps) == (5e-5, 100, 5)
    assert not g.HasField("num_generations")
    g = pb.GrpoConfig(logging_steps=7, max_steps=5)
    with pytest.raises(InvalidArgument) as ei:
        config.check_schedule(g)
    assert ei.value.field == "grpo.logging_steps"


# ---------------------------------------------------------------------------------------------
# TRL 1.16's knobs (issue 23): in the table, validated, refused when this machine cannot honour them


def grpo_request(**grpo):
    from _builders import small_request

    return small_request("knobs", **grpo)


def test_trl_knobs_are_in_the_grpo_table_with_trl_defaults(tmp_path):
    from py_trainer.server.validate import validate_train_request

    g = validate_train_request(grpo_request(), tmp_path).grpo
    assert (g.importance_sampling_level, g.num_iterations, g.top_k, g.min_p, g.repetition_penalty,
            g.use_liger_kernel) == ("token", 1, 0, 0.0, 1.0, False)
    assert config.GRPO["vllm_importance_sampling_cap"].trl == "vllm_importance_sampling_clip_max"
    assert "importance_sampling_level" in config.describe_defaults()


@pytest.mark.parametrize("grpo, field, text", [
    ({"importance_sampling_level": "seq"}, "grpo.importance_sampling_level", "one of ('token', 'sequence')"),
    ({"num_iterations": 0}, "grpo.num_iterations", "in [1, 64]"),
    ({"top_k": 2_000_000}, "grpo.top_k", "in [0, 1000000]"),
    ({"min_p": 1.5}, "grpo.min_p", "in [0, 1]"),
    ({"repetition_penalty": 0.0}, "grpo.repetition_penalty", "in (0, 10]"),
])
def test_trl_knob_out_of_range_is_invalid_argument(tmp_path, grpo, field, text):
    from py_trainer.server.validate import validate_train_request

    with pytest.raises(InvalidArgument) as ei:
        validate_train_request(grpo_request(**grpo), tmp_path)
    assert ei.value.field == field and text in str(ei.value)


@pytest.mark.parametrize("name, value", [("vllm_importance_sampling_correction", False),
                                         ("vllm_importance_sampling_mode", "token_mask"),
                                         ("vllm_importance_sampling_cap", 2.0)])
def test_vllm_importance_sampling_without_vllm_is_failed_precondition(tmp_path, name, value):
    from py_trainer.core.errors import FailedPrecondition
    from py_trainer.server.validate import validate_train_request

    with pytest.raises(FailedPrecondition) as ei:
        validate_train_request(grpo_request(**{name: value}), tmp_path)
    assert ei.value.field == f"grpo.{name}" and "use_vllm" in str(ei.value)


def test_liger_kernel_without_the_package_is_failed_precondition(tmp_path):
    import importlib.util

    from py_trainer.core.errors import FailedPrecondition
    from py_trainer.server.validate import validate_train_request

    if importlib.util.find_spec("liger_kernel") is not None:
        pytest.skip("liger-kernel is installed here")
    with pytest.raises(FailedPrecondition) as ei:
        validate_train_request(grpo_request(use_liger_kernel=True), tmp_path)
    assert ei.value.field == "grpo.use_liger_kernel" and "liger-kernel" in str(ei.value)


def test_the_effective_request_validates_again(tmp_path):
    """A run's stored request.json, sent again, is accepted: the vLLM-only knobs stay unset."""
    from py_trainer.server.validate import validate_train_request

    eff = validate_train_request(grpo_request(importance_sampling_level="sequence"), tmp_path)
    assert validate_train_request(eff, tmp_path) == eff
