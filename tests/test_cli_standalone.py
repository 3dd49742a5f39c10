"""The standalone commands `py-trainer evaluate --config` and `py-trainer data check-annotators`,
run as a user would (a subprocess), checked against the library functions they wrap."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import json_format

from _builders import annotate, small_request
from _sidecar import REPO, running_sidecar, sidecar_env
from py_trainer.data.annotation import annotator_agreement, insert_gold_groups
from py_trainer.data.preference_data import group_to_json
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

pytestmark = pytest.mark.slow  # every test runs `py-trainer` as a subprocess


TASKS = REPO / "agent-evals" / "tasks" / "aml_typology.jsonl"


def cli(*args: str, cwd: Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "py_trainer.server.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600)


# ---------------------------------------------------------------------------------------------
# py-trainer evaluate


def random_adapter(model_dir: Path, out: Path) -> Path:
    """A LoRA adapter with non-zero B, so the adapter variant really differs from the base."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                           LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    model.save_pretrained(out)
    return out


def test_evaluate_from_a_config_file(tmp_path, tiny_model_dir, tiny_model_home):
    random_adapter(tiny_model_dir, tmp_path / "adapter")
    (tmp_path / "tasks.jsonl").write_text(TASKS.read_text())
    (tmp_path / "eval.yaml").write_text(
        "tasks: {jsonl_path: tasks.jsonl, split: test, limit: 6}\n"
        "adapters: [{name: mine, path: adapter}]\n"
        "graders: [{name: exact_match}, {name: format}]\n")
    env = sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))
    proc = cli("evaluate", "--config", "eval.yaml", "--out", "result.json", "--data-root", ".", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json_format.ParseDict(json.loads((tmp_path / "result.json").read_text()), pb.EvaluateResult())
    assert [v.name for v in result.variants] == ["base", "mine"]
    test_ids = [json.loads(l)["id"] for l in TASKS.read_text().splitlines() if json.loads(l)["split"] == "test"][:6]
    for v in result.variants:
        assert [t.task_id for t in v.tasks] == test_ids
        assert all(set(s.scores) == {"exact_match", "format"} for t in v.tasks for s in t.samples)
        mean = sum(t.samples[0].scores["exact_match"] for t in v.tasks) / len(v.tasks)
        assert v.mean_scores["exact_match"] == pytest.approx(mean)
        assert f"{v.name}: exact_match {v.mean_scores['exact_match']:.3f}" in proc.stdout
    # the random adapter changes what the model writes: the two variants are really different models
    base, mine = ([s.completion for t in v.tasks for s in t.samples] for v in result.variants)
    assert base != mine
    assert "6/6 tasks" in proc.stdout


def test_evaluate_config_mistakes_name_the_field(tmp_path):
    (tmp_path / "eval.yaml").write_text("tasks: {jsonl_path: tasks.jsonl}\ntemperature: 0\nsamples_per_task: 3\n")
    (tmp_path / "tasks.jsonl").write_text(TASKS.read_text().splitlines()[0] + "\n")
    proc = cli("evaluate", "--config", "eval.yaml", "--data-root", ".", cwd=tmp_path)
    assert proc.returncode == 2
    assert "samples_per_task:" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------------------------------
# py-trainer data check-annotators


def group(i: int, ranks=()) -> pb.RankedGroup:
    g = pb.RankedGroup(prompt=f"case {i}: which typology?", ranks=list(ranks))
    for j in range(4):
        g.responses.add(id=f"r{j}", text=f"answer {j} for case {i}")
    return g


def write_groups(path: Path, groups) -> Path:
    path.write_text("".join(json.dumps(group_to_json(g)) + "\n" for g in groups))
    return path


def test_check_annotators_accepts_rejects_and_reports_agreement(tmp_path):
    gold = [group(100, [0, 1, 2, 3]), group(101, [3, 2, 1, 0])]
    batch = insert_gold_groups([group(i) for i in range(20)], gold)
    expert = {g.prompt: list(g.ranks) for g in gold}
    good = annotate(batch, lambda b, g: expert.get(g.prompt, [0, 1, 2, 3]))
    # annotator "careless" swaps best and worst on a gold group (3 positions) and on every 3rd group
    careless = annotate(batch, lambda b, g: [3, 1, 2, 0] if g.prompt == gold[0].prompt or b % 3 == 0
                         else expert.get(g.prompt, [0, 1, 2, 3]))
    write_groups(tmp_path / "gold.jsonl", gold)
    write_groups(tmp_path / "alice.jsonl", good)
    write_groups(tmp_path / "careless.jsonl", careless)

    proc = cli("data", "check-annotators", "--gold", "gold.jsonl", "alice.jsonl", "careless.jsonl", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # one batch is rejected
    out = proc.stdout
    assert "alice: ACCEPTED: 2 gold groups" in out
    assert "careless: REJECTED: 2 gold groups" in out
    want = annotator_agreement({"alice": good, "careless": careless})
    assert f"Fleiss' kappa on rank positions {want.fleiss_kappa:.3f} ({want.subjects} (group, response) subjects" in out
    assert f"Kendall's W {want.kendall_w_mean:.3f}" in out

    proc = cli("data", "check-annotators", "--gold", "gold.jsonl", "alice.jsonl", cwd=tmp_path)
    assert proc.returncode == 0 and "alice: ACCEPTED" in proc.stdout


def test_check_annotators_bad_file_is_one_line_exit_2(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"prompt": "p", "responses": [{"id": "x", "text": "t"}]\n')
    proc = cli("data", "check-annotators", "a.jsonl", "a.jsonl", cwd=tmp_path)
    assert proc.returncode == 2
    assert "a.jsonl line 1" in proc.stderr and "Traceback" not in proc.stderr


def test_check_annotators_flags_a_ranking_its_own_scores_contradict(tmp_path):
    line = {"prompt": "case 1", "ranks": [0, 1],
            "responses": [{"id": "a", "text": "x", "scores": {"correctness": 1, "helpfulness": 2}},
                          {"id": "b", "text": "y", "scores": {"correctness": 5, "helpfulness": 4}}]}
    (tmp_path / "gold.jsonl").write_text(json.dumps(dict(line, prompt="gold", ranks=[1, 0])) + "\n")
    (tmp_path / "ann.jsonl").write_text(json.dumps(line) + "\n")
    proc = cli("data", "check-annotators", "--gold", "gold.jsonl", "ann.jsonl", cwd=tmp_path)
    assert "ann: group 0: ranks a above b, but b scores higher on correctness (5 vs 1) and helpfulness (4 vs 2)" \
        in proc.stdout, proc.stdout + proc.stderr


def test_standalone_train_refuses_a_runs_root_a_sidecar_serves(tmp_path, tiny_model_home):
    import yaml

    req = json_format.MessageToDict(small_request("locked", max_steps=1), preserving_proto_field_name=True)
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(req))
    with running_sidecar(tmp_path) as sc:
        proc = cli("train", "--config", "run.yaml", "--runs-root", str(sc.runs_root), "--data-root", ".", cwd=tmp_path,
                   env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home)))
        assert proc.returncode == 2, proc.stderr
        assert f"pid {sc.proc.pid}" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert [p.name for p in sc.runs_root.iterdir() if not p.name.startswith(".")] == []
