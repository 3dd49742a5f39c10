"""Ranked-group data: the cleaner on a hand-written messy file, the format validator, Kendall's
tau-b against scipy, gold-group checks, and Fleiss' kappa across annotators against statsmodels."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from _builders import annotate
from py_trainer.core.errors import InvalidArgument
from py_trainer.core.stats import kendall_tau_b
from py_trainer.data.annotation import annotator_agreement, check_annotator_batch, insert_gold_groups, rank_count_table
from py_trainer.data.preference_data import GroupFormatError, check_group, clean_groups, normalise_text, ranking_pairs
from py_trainer.data.request_data import load_ranked_groups
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

REPO = Path(__file__).resolve().parents[1]
MESSY = REPO / "tests" / "data" / "messy_groups.jsonl"

EXPECTED_REPORT = [
    "line 2: dropped: duplicate prompt (first kept on line 1)",
    "line 3: dropped response r1: refusal (matches /\\bI(?:'m|\\u2019m| am) (?:sorry|unable|not able)\\b/)",
    "line 4: dropped: ranks: [0, 0, 1] is not a permutation of 0..2 (one rank per response, 0 = best, no ties)",
    "line 5: dropped: not valid JSON (Unterminated string starting at: line 1 column 12 (char 11))",
    "line 6: dropped: blank line",
    "line 8: dropped: fewer than 2 responses left after dropping t1: template (matches /\\{\\{[^}]*\\}\\}/)",
    "line 9: dropped: responses[1].text: must be a string",
]


def run_clean(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "data", "clean", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


# ---------------------------------------------------------------------------------------------
# Cleaner


@pytest.mark.slow
def test_clean_messy_file_reports_every_drop(tmp_path):
    src = tmp_path / "messy.jsonl"
    shutil.copy(MESSY, src)
    before = src.read_bytes()
    assert b"\r\n" in before  # the fixture really has CRLF lines
    out, report = tmp_path / "clean.jsonl", tmp_path / "report.json"

    proc = run_clean(str(src), str(out), "--report", str(report))

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == EXPECTED_REPORT
    assert "kept 4 of 10 lines" in proc.stderr
    assert src.read_bytes() == before  # never edits its input
    rep = json.loads(report.read_text())
    assert [(d["line"], d["reason"]) for d in rep["dropped_lines"]] == [
        (int(line.split(":")[0].split()[1]), line.split(": dropped: ", 1)[1])
        for line in EXPECTED_REPORT if ": dropped: " in line]
    assert rep["dropped_responses"] == [{"line": 3, "id": "r1", "reason": EXPECTED_REPORT[1].split(": ", 1)[1]
                                         .split("r1: ", 1)[1]}]
    assert rep["normalised_lines"] == [1, 7]

    raw = out.read_bytes()
    assert b"\r" not in raw
    kept = [json.loads(line) for line in raw.decode().splitlines()]
    assert len(kept) == 4
    # line 1: interior runs of spaces collapsed, everything else as written
    assert kept[0]["prompt"] == "Case: cash deposits of $9,500 at three branches.\nName the typology."
    assert kept[0]["responses"][1]["text"] == "<answer>structuring</answer> because each deposit is under $10,000."
    assert kept[0]["ranks"] == [1, 0, 2] and kept[0]["metadata"] == {"annotator": "ann-1"}
    # line 3: the refusal is gone and the rest keep their order, re-ranked 0..2
    assert [r["id"] for r in kept[1]["responses"]] == ["r0", "r2", "r3"]
    assert kept[1]["ranks"] == [0, 1, 2]
    # line 7: CRLF -> LF, spaces inside the fenced block and the inline code span kept
    assert kept[2]["prompt"] == ("Explain the rule.\nShow the check:\n```python\nif  amount  >=  10_000:\n"
                                 "    flag()\n```\nThen answer.")
    assert kept[2]["responses"][0]["text"] == "Use `amount  >=  10_000` as the threshold."
    assert kept[2]["responses"][1]["text"] == "Flag it."
    # line 10: no ranks key = not annotated yet; kept as is
    assert "ranks" not in kept[3]
    for obj in kept:
        check_group(obj, need_ranks=False)


@pytest.mark.slow
def test_clean_custom_patterns_replace_the_defaults(tmp_path):
    out = tmp_path / "clean.jsonl"
    proc = run_clean(str(MESSY), str(out), "--refusal-pattern", r"\blayering\b")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "line 1: dropped response c: refusal/template (matches /\\blayering\\b/)" in lines
    assert "line 3: dropped response r3: refusal/template (matches /\\blayering\\b/)" in lines
    assert not any("r1" in line for line in lines)  # the default refusal pattern is no longer used
    assert "line 8: dropped" not in proc.stdout  # nor the default template pattern


@pytest.mark.slow
def test_clean_refuses_to_edit_its_input_and_unreadable_input(tmp_path):
    src = tmp_path / "in.jsonl"
    shutil.copy(MESSY, src)
    before = src.read_bytes()
    assert run_clean(str(src), str(src)).returncode == 2
    assert src.read_bytes() == before
    proc = run_clean(str(tmp_path / "missing.jsonl"), str(tmp_path / "out.jsonl"))
    assert proc.returncode == 2 and "cannot read" in proc.stderr
    assert not (tmp_path / "out.jsonl").exists()
    assert run_clean(str(src), str(tmp_path / "o.jsonl"), "--refusal-pattern", "(unclosed").returncode == 2


def test_normalise_text_leaves_code_indentation_and_trailing_spaces():
    text = "a  b\r\n  indented  line  \r```\nx  =  1\n```\n~~~~\ny  =  2\n~~~~\nuse `p  q`  now"
    assert normalise_text(text) == "a b\n  indented line  \n```\nx  =  1\n```\n~~~~\ny  =  2\n~~~~\nuse `p  q` now"
    # an unclosed fence protects the rest of the text (CommonMark)
    assert normalise_text("```\na  b") == "```\na  b"


def test_cleaner_handles_cr_only_files_and_bad_utf8():
    raw = (b'{"prompt": "p", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]}\r'
           b'\xff\xfe\r'
           b'{"prompt": "q", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": ""}], "ranks": [0, 1]}\r')
    kept, report = clean_groups(raw)
    assert len(kept) == 1
    assert report.lines() == ["line 2: dropped: not valid UTF-8 (byte 0)",
                              "line 3: dropped: fewer than 2 responses left after dropping b: empty response"]


# ---------------------------------------------------------------------------------------------
# Format and loading


@pytest.mark.parametrize("obj,key", [
    ({"prompt": "", "responses": []}, "prompt"),
    ({"prompt": "p", "responses": [{"id": "a", "text": "x"}]}, "responses"),
    ({"prompt": "p", "responses": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}, "responses[1].id"),
    ({"prompt": "p", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}], "ranks": [1, 2]},
     "ranks"),
    ({"prompt": "p", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}], "ranks": [True, 0]},
     "ranks"),
    ({"prompt": "p", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}], "metadata": []},
     "metadata"),
])
def test_check_group_names_the_key(obj, key):
    with pytest.raises(GroupFormatError) as ei:
        check_group(obj, need_ranks=False)
    assert ei.value.key == key


def test_training_needs_annotated_groups():
    with pytest.raises(GroupFormatError, match="not annotated"):
        check_group({"prompt": "p", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]},
                    need_ranks=True)


def test_load_ranked_groups_errors_name_field_and_line(tmp_path):
    good = {"prompt": "p", "responses": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}], "ranks": [1, 0]}
    bad = dict(good, ranks=[0, 0])
    ds = json_format.ParseDict({"inline": {"groups": [good, bad]}}, pb.Dataset())
    with pytest.raises(InvalidArgument) as ei:
        load_ranked_groups(ds, tmp_path, "dataset")
    assert ei.value.field == "dataset.inline.groups[1].ranks"

    lines = [json.dumps({"prompt": "p", "responses": good["responses"], "ranks": [1, 0], "split": "train"}),
             json.dumps({"prompt": "q", "responses": good["responses"], "ranks": [1, 0], "split": "test"}),
             json.dumps({"prompt": "r", "responses": good["responses"], "ranks": [2, 0], "split": "train"})]
    (tmp_path / "groups.jsonl").write_text("\n".join(lines) + "\n")
    ds = pb.Dataset(jsonl_path="groups.jsonl", split="test")
    groups = load_ranked_groups(ds, tmp_path, "dataset")
    assert [g.prompt for g in groups] == ["q"] and list(groups[0].ranks) == [1, 0]
    with pytest.raises(InvalidArgument) as ei:
        load_ranked_groups(pb.Dataset(jsonl_path="groups.jsonl"), tmp_path, "dataset")
    assert ei.value.field == "dataset.jsonl_path"
    assert ei.value.message.startswith("groups.jsonl line 3: ranks: [2, 0] is not a permutation")


def test_ranking_pairs_are_every_ordered_pair():
    pairs = ranking_pairs([2, 0, 3, 1])
    assert len(pairs) == 6
    assert pairs[0] == (1, 3)  # rank 0 over rank 1 first
    assert all([2, 0, 3, 1][b] < [2, 0, 3, 1][w] for b, w in pairs)
    assert len(ranking_pairs(list(range(7)))) == 21


# ---------------------------------------------------------------------------------------------
# Kendall's tau-b


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=25))
def test_kendall_tau_b_matches_scipy(pairs):
    from scipy.stats import kendalltau

    x, y = [p[0] for p in pairs], [p[1] for p in pairs]
    ours = kendall_tau_b(x, y)
    theirs = kendalltau(x, y, variant="b").statistic
    if math.isnan(theirs):
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)


def test_kendall_tau_b_permutations():
    assert kendall_tau_b([0, 1, 2, 3], [0, 1, 2, 3]) == 1.0
    assert kendall_tau_b([0, 1, 2, 3], [3, 2, 1, 0]) == -1.0
    assert kendall_tau_b([0, 1, 2, 3], [1, 0, 2, 3]) == pytest.approx(4 / 6)


# ---------------------------------------------------------------------------------------------
# Gold groups and annotators


def make_group(i: int, k: int = 4, ranks=None) -> pb.RankedGroup:
    g = pb.RankedGroup(prompt=f"prompt {i}", ranks=ranks or [])
    for j in range(k):
        g.responses.add(id=f"r{j}", text=f"response {j} to {i}")
    return g


def test_gold_groups_every_ten_and_the_batch_check():
    groups = [make_group(i) for i in range(25)]
    gold = [make_group(100, ranks=[0, 1, 2, 3]), make_group(101, ranks=[3, 2, 1, 0])]
    batch = insert_gold_groups(groups, gold)
    assert len(batch) == 27
    assert [b for b, g in enumerate(batch) if g.prompt in ("prompt 100", "prompt 101")] == [10, 21]
    assert not batch[10].ranks and not batch[21].ranks  # the expert ranks are not shown to annotators
    expert = {g.prompt: list(g.ranks) for g in gold}

    # within one position of gold everywhere: accepted
    def close(b, g):
        if g.prompt in expert:
            r = expert[g.prompt]
            return [r[1], r[0], r[2], r[3]]  # swaps the expert's first two responses: 1 position each
        return [0, 1, 2, 3]

    ok = check_annotator_batch(annotate(batch, close), gold)
    assert ok.accepted, ok.reasons
    assert ok.gold_groups_found == 2
    assert [c.max_deviation for c in ok.comparisons] == [1, 1]
    assert ok.mean_kendall_tau == pytest.approx(4 / 6)

    # one gold group with the best and worst swapped: 3 positions off -> rejected with a report
    def far(b, g):
        if g.prompt == "prompt 101":
            return [0, 2, 1, 3]  # expert: [3, 2, 1, 0]
        return expert.get(g.prompt, [0, 1, 2, 3])

    bad = check_annotator_batch(annotate(batch, far), gold)
    assert not bad.accepted
    assert bad.reasons == ["batch group 21 (gold 1): deviates from gold by 3 positions (> 1): r0 0 vs 3, r3 3 vs 0"]
    assert bad.comparisons[0].kendall_tau == 1.0 and bad.comparisons[1].kendall_tau == pytest.approx(-2 / 3)
    assert bad.lines()[0].startswith("REJECTED: 2 gold groups")

    # a gold group left unannotated, and a batch without gold groups
    unannotated = annotate(batch, lambda b, g: [] if b == 10 else [0, 1, 2, 3])
    assert check_annotator_batch(unannotated, gold).reasons[0] == "batch group 10 (gold 0): not annotated"
    assert check_annotator_batch(annotate(groups, lambda b, g: [0, 1, 2, 3]), gold).reasons == [
        "no gold group found in the batch: it cannot be checked"]


def test_fleiss_kappa_across_annotators_matches_statsmodels():
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    rng = random.Random(7)
    groups = [make_group(i, k=4) for i in range(15)]
    truth = {g.prompt: rng.sample(range(4), 4) for g in groups}

    def annotator(noise: float):
        def rank(b, g):
            r = list(truth[g.prompt])
            if rng.random() < noise:  # swap two neighbouring places
                a = rng.randrange(3)
                ia, ib = r.index(a), r.index(a + 1)
                r[ia], r[ib] = a + 1, a
            return r
        return rank

    batches = {name: annotate(groups, annotator(noise)) for name, noise in
               (("ann-a", 0.2), ("ann-b", 0.5), ("ann-c", 0.8))}
    # one group ann-c left unannotated: it drops out for everyone
    del batches["ann-c"][3].ranks[:]

    report = annotator_agreement(batches)

    # independently: subjects x raters matrix of categories -> counts -> statsmodels
    matrix = []
    by_prompt = {name: {g.prompt: dict(zip([r.id for r in g.responses], g.ranks)) for g in b if g.ranks}
                 for name, b in batches.items()}
    for g in groups:
        if not all(g.prompt in m for m in by_prompt.values()):
            continue
        for r in g.responses:
            matrix.append([by_prompt[name][g.prompt][r.id] for name in batches])
    counts, _ = aggregate_raters(matrix, n_cat=4)
    expected = sm_fleiss_kappa(counts, method="fleiss")
    assert report.subjects == 14 * 4 and report.raters == 3
    assert report.fleiss_kappa == pytest.approx(expected, abs=1e-12)
    assert 0 < report.fleiss_kappa < 1
    table, labels = rank_count_table(batches)
    assert [list(row) for row in counts] == table and len(labels) == 56


def test_fleiss_kappa_needs_two_annotators():
    with pytest.raises(ValueError, match="at least 2 annotators"):
        annotator_agreement({"only": [make_group(0, ranks=[0, 1, 2, 3])]})


@pytest.mark.slow
def test_data_sample_cli_writes_groups_ready_to_rank(tmp_path, tiny_model_home):
    import subprocess
    import sys

    from _sidecar import REPO, sidecar_env

    req = tmp_path / "sample.yaml"
    req.write_text("prompts: ['Case: cash deposits just under the threshold.\\n', 'Case: wires out again.\\n']\n"
                   "k: 4\nstrategy: SAMPLING_STRATEGY_TOP_P_LADDER\nmax_new_tokens: 12\nseed: 3\n")
    out = tmp_path / "groups.jsonl"
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "data", "sample", str(req), str(out),
                           "--data-root", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["responses"]) == 4 and r["ranks"] == [] for r in rows)
    bad = tmp_path / "bad.yaml"
    bad.write_text("prompts: ['p']\nk: 1\n")
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "data", "sample", str(bad), str(tmp_path / "x"),
                           "--data-root", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=sidecar_env())
    assert proc.returncode == 2 and "k:" in proc.stderr and not (tmp_path / "x").exists()


# ---------------------------------------------------------------------------------------------
# Issue 10: the SOP's 1-5 scores, Kendall's W next to Fleiss' kappa, contradicting rankings


def _scored_group(scores, prefs):
    return {"prompt": "p", "responses": [{"id": f"r{i}", "text": f"t{i}", "scores": s} for i, s in enumerate(scores)],
            "ranks": prefs}


@pytest.mark.parametrize("scores,key", [
    ({"correctness": 6, "helpfulness": 3}, "responses[0].scores.correctness"),
    ({"correctness": 3}, "responses[0].scores.helpfulness"),
    ({"correctness": 3, "helpfulness": 2.5}, "responses[0].scores.helpfulness"),
    ({"correctness": 3, "helpfulness": 2, "style": 4}, "responses[0].scores.style"),
    ("5/5", "responses[0].scores"),
])
def test_check_group_validates_the_sop_scores(scores, key):
    with pytest.raises(GroupFormatError) as e:
        check_group(_scored_group([scores, {"correctness": 1, "helpfulness": 1}], [0, 1]), need_ranks=True)
    assert e.value.key == key


def test_scores_survive_the_proto_round_trip():
    from py_trainer.data.preference_data import group_from_json, group_to_json, response_scores

    obj = _scored_group([{"correctness": 5, "helpfulness": 4}, {"correctness": 2, "helpfulness": 3}], [0, 1])
    check_group(obj, need_ranks=True)
    g = group_from_json(obj)
    assert response_scores(g) == {"r0": {"correctness": 5, "helpfulness": 4}, "r1": {"correctness": 2, "helpfulness": 3}}
    back = group_to_json(g)
    assert back["responses"] == obj["responses"] and back["metadata"] == {}


def test_annotator_check_flags_a_ranking_that_contradicts_both_scores():
    from py_trainer.data.annotation import score_contradictions
    from py_trainer.data.preference_data import group_from_json

    # r1 is ranked first, but r0 is more correct AND more helpful; r2 vs r0 contradicts one score only
    obj = _scored_group([{"correctness": 5, "helpfulness": 5}, {"correctness": 2, "helpfulness": 3},
                         {"correctness": 4, "helpfulness": 5}], [1, 0, 2])
    found = score_contradictions([group_from_json(obj)])
    assert [(c.better, c.worse) for c in found] == [("r1", "r0"), ("r1", "r2")]
    assert found[0].line() == "group 0: ranks r1 above r0, but r0 scores higher on correctness (5 vs 2) and helpfulness (5 vs 3)"
    consistent = _scored_group([{"correctness": 5, "helpfulness": 5}, {"correctness": 2, "helpfulness": 3}], [0, 1])
    assert score_contradictions([group_from_json(consistent)]) == []


def test_kendall_w_is_reported_next_to_fleiss_kappa():
    groups = [make_group(i, k=4) for i in range(6)]
    same = {name: annotate(groups, lambda b, g: [0, 1, 2, 3]) for name in ("a", "b", "c")}
    rep = annotator_agreement(same)
    assert rep.kendall_w_mean == pytest.approx(1.0) and rep.kendall_w_groups == 6
    lines = rep.lines()
    assert lines[0].startswith("Fleiss' kappa on rank positions 1.000") and "Kendall's W 1.000" in lines[1]
    rev = {"a": annotate(groups, lambda b, g: [0, 1, 2, 3]), "b": annotate(groups, lambda b, g: [3, 2, 1, 0])}
    assert annotator_agreement(rev).kendall_w_mean == pytest.approx(0.0)
