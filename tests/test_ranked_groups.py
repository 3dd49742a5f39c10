"""Issue 32, items 5 and 6 (the ranked-preference mode): one name for the rank list ("ranks", as
in the proto) in files and messages, identical responses are neither a gold deviation nor a kept
group, and `data clean` keeping no line is a failure, not exit 0."""

from __future__ import annotations

import json

import pytest

from py_trainer.data.annotation import check_annotator_batch
from py_trainer.data.preference_data import GroupFormatError, check_group, clean_groups, group_from_json, group_to_json
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.server import cli

GROUP = {"prompt": "p", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]}


def test_the_rank_list_is_called_ranks_in_files_as_in_the_proto():
    g = group_from_json({**GROUP, "ranks": [1, 0]})
    assert list(g.ranks) == [1, 0]
    assert group_to_json(g)["ranks"] == [1, 0] and "preferences" not in group_to_json(g)


def test_the_old_key_is_refused_naming_the_one_name():
    with pytest.raises(GroupFormatError) as ei:
        check_group({**GROUP, "preferences": [1, 0]}, need_ranks=True)
    assert ei.value.key == "preferences"
    assert '"ranks"' in str(ei.value)


def test_a_bad_rank_list_is_named_ranks():
    with pytest.raises(GroupFormatError) as ei:
        check_group({**GROUP, "ranks": [0, 0]}, need_ranks=True)
    assert str(ei.value).startswith("ranks: [0, 0] is not a permutation")


def test_clean_drops_a_response_identical_to_an_earlier_one_and_a_group_left_with_one():
    raw = "\n".join(json.dumps(g) for g in [
        {"prompt": "q1", "responses": [{"id": "a", "text": "same"}, {"id": "b", "text": "same "}, {"id": "c", "text": "other"}], "ranks": [2, 0, 1]},
        {"prompt": "q2", "responses": [{"id": "a", "text": "same"}, {"id": "b", "text": "same"}], "ranks": [0, 1]},
    ]).encode()
    kept, report = clean_groups(raw)
    assert len(kept) == 1
    assert [r["id"] for r in kept[0]["responses"]] == ["a", "c"] and kept[0]["ranks"] == [1, 0]
    assert report.lines() == ["line 1: dropped response b: identical to response a",
                              "line 2: dropped: fewer than 2 responses left after dropping b: identical to response a"]


def _group(prompt: str, texts: list[str], ranks: list[int]) -> pb.RankedGroup:
    g = pb.RankedGroup(prompt=prompt, ranks=ranks)
    for i, t in enumerate(texts):
        g.responses.add(id=f"r{i}", text=t)
    return g


def test_reordering_identical_responses_is_no_deviation_from_gold():
    texts = ["same", "same", "same", "different"]
    gold = _group("g", texts, [0, 1, 2, 3])
    batch = [_group("g", texts, [2, 1, 0, 3])]  # the three identical ones in reverse
    report = check_annotator_batch(batch, [gold], max_deviation=1)
    assert report.accepted, report.reasons
    assert report.comparisons[0].max_deviation == 0 and report.comparisons[0].kendall_tau == pytest.approx(1.0)
    # a real reordering is still caught
    bad = check_annotator_batch([_group("g", texts, [1, 2, 3, 0])], [gold], max_deviation=1)
    assert not bad.accepted and bad.comparisons[0].max_deviation == 3


def test_clean_keeping_no_line_exits_1(tmp_path, capsys):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text('{"prompt": "q"}\nnot json\n')
    assert cli.main(["data", "clean", str(src), str(out)]) == 1
    err = capsys.readouterr().err
    assert "kept 0 of 2 lines" in err and "no group left" in err
