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

from py_trainer import config
from py_trainer.errors import InvalidArgument
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
    proc = subprocess.run([sys.executable, "-m", "py_trainer.cli", "defaults"], capture_output=True, text=True,
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
