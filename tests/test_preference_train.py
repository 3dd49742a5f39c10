"""Ranked-preference mode: request validation, the held-out metrics, a real DPO run from ranked
AML groups on the embedded default model (held-out pairwise accuracy must rise), cancel, and
group sampling for annotators."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from google.protobuf import json_format

from _builders import aml_groups, preference_request
from py_trainer.core.errors import InvalidArgument, NotFound
from py_trainer.data.preference_data import check_group
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.server.validate import validate_train_request
from py_trainer.training.train_preference import pairwise_agreement, pick_metrics
from py_trainer.workers.sampling import sample_groups_stream, sample_groups_to_jsonl, validate_sample_request
from py_trainer.workers.train_worker import train_run

REPO = Path(__file__).resolve().parents[1]
def write_run(tmp_path: Path, run_id: str, req: pb.TrainRequest) -> Path:
    eff = validate_train_request(req, tmp_path)
    run_dir = tmp_path / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "request.json").write_text(json_format.MessageToJson(eff))
    return run_dir


# ---------------------------------------------------------------------------------------------
# Validation


def test_validation_fills_the_preference_defaults(tmp_path):
    eff = validate_train_request(preference_request(), tmp_path)
    assert (eff.lora.r, eff.lora.alpha, eff.lora.dropout, list(eff.lora.target_modules)) == (64, 128.0, 0.0,
                                                                                                ["q_proj", "v_proj"])
    assert eff.grpo.warmup_ratio == pytest.approx(0.2)
    assert eff.preference.beta == pytest.approx(0.1)
    assert eff.preference.num_held_out_groups == 4  # a fifth of 24 groups
    assert eff.grpo.learning_rate == pytest.approx(5e-5)
    for name in ("num_generations", "beta", "temperature", "loss_type"):
        assert not eff.grpo.HasField(name)  # GRPO-only knobs stay unset: nothing pretends they applied


@pytest.mark.parametrize("overrides,field", [
    ({"grpo": {"num_generations": 4}}, "grpo.num_generations"),
    ({"grpo": {"beta": 0.1}}, "grpo.beta"),
    ({"rewards": [{"name": "exact_match"}]}, "rewards"),
    ({"held_out": {"num_prompts": 2}}, "held_out"),
    ({"preference": {"beta": 0}}, "preference.beta"),
    ({"preference": {"num_held_out_groups": 24}}, "preference.num_held_out_groups"),
    ({"grpo": {"warmup_ratio": 1.0}}, "grpo.warmup_ratio"),
    ({"lora": {"r": 0}}, "lora.r"),
    ({"dataset": {"inline": {"groups": aml_groups("train", 3)[:2] + [
        dict(aml_groups("train", 3)[2], ranks=[0, 1, 1, 3])]}}}, "dataset.inline.groups[2].ranks"),
    ({"dataset": {"inline": {"rows": [{"id": "x", "prompt": "p", "answers": ["a"]}]}}}, "dataset.inline.rows"),
])
def test_validation_names_the_field(tmp_path, overrides, field):
    with pytest.raises(InvalidArgument) as ei:
        validate_train_request(preference_request(**overrides), tmp_path)
    assert ei.value.field == field, str(ei.value)


def test_validation_reads_a_jsonl_file_with_line_numbers(tmp_path):
    lines = []
    for g in aml_groups("train", 6):
        lines.append(json.dumps({"prompt": g["prompt"], "responses": g["responses"], "ranks": g["ranks"]}))
    lines[4] = lines[4].replace('"ranks": [', '"ranks": [9, ')
    (tmp_path / "groups.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidArgument) as ei:
        validate_train_request(preference_request(dataset={"jsonl_path": "groups.jsonl"}), tmp_path)
    assert ei.value.field == "dataset.jsonl_path"
    assert ei.value.message.startswith("groups.jsonl line 5: ranks:")


# ---------------------------------------------------------------------------------------------
# Held-out metrics


def test_pairwise_agreement_counts_ties_as_half():
    assert pairwise_agreement([3.0, 2.0, 1.0], [0, 1, 2]) == (3.0, 3)
    assert pairwise_agreement([1.0, 2.0, 3.0], [0, 1, 2]) == (0.0, 3)
    assert pairwise_agreement([0.0, 0.0, 0.0, 0.0], [2, 0, 3, 1]) == (3.0, 6)


def test_pick_metrics_expect_over_random_tie_breaks():
    # clear pick (human rank 1) and runner-up (human rank 0)
    assert pick_metrics([0.9, 0.5, 0.1], [1, 0, 2]) == (1.0, -1.0)
    # all tied: win = share of human top-2 among them, margin 0 by symmetry
    assert pick_metrics([0.0] * 4, [3, 1, 0, 2]) == (0.5, 0.0)
    # one pick (rank 0), runner-up tied between ranks 2 and 3
    assert pick_metrics([1.0, 0.2, 0.2, -1.0], [0, 2, 3, 1]) == (1.0, 2.5)


# ---------------------------------------------------------------------------------------------
# Training on the default model


@pytest.mark.slow
def test_trains_from_ranked_groups_and_heldout_accuracy_rises(tmp_path, tiny_model_home, monkeypatch):
    monkeypatch.setenv("PY_TRAINER_HOME", str(tiny_model_home))
    req = preference_request(
        dataset={"inline": {"groups": aml_groups("train", 32)}},
        preference={"held_out": {"inline": {"groups": aml_groups("test", 16, seed=1)}}},
        grpo={"max_steps": 10, "per_device_train_batch_size": 4, "logging_steps": 5, "save_steps": 5, "seed": 0},
    )
    run_dir = write_run(tmp_path, "pref-1", req)
    events: list[pb.RunEvent] = []
    t0 = time.perf_counter()
    state = train_run(run_dir, tmp_path, events.append, lambda: False)
    seconds = time.perf_counter() - t0
    assert state == pb.RUN_STATE_SUCCEEDED

    steps = [e.train_step for e in events if e.WhichOneof("kind") == "train_step"]
    acc = [(s.step, round(s.metrics["heldout/pairwise_accuracy"], 3)) for s in steps]
    print(f"\nheld-out pairwise accuracy by step: {acc}; run took {seconds:.1f} s")
    assert [s.step for s in steps] == [0, 5, 10]
    start, end = steps[0].metrics, steps[-1].metrics
    assert start["heldout/pairwise_accuracy"] == 0.5  # step 0: policy = reference, every score ties
    assert end["heldout/pairwise_accuracy"] >= start["heldout/pairwise_accuracy"] + 0.15
    for key in ("loss", "grad_norm", "learning_rate", "rewards/chosen", "rewards/rejected", "rewards/accuracies",
                "rewards/margins", "logps/chosen", "logps/rejected", "heldout/group_win_rate", "heldout/win_margin",
                "heldout/preference_consistency"):
        assert key in end, key
    assert end["heldout/preference_consistency"] >= 0
    assert [e.checkpoint.path for e in events if e.WhichOneof("kind") == "checkpoint"] == [
        "checkpoints/checkpoint-5", "checkpoints/checkpoint-10"]

    result = events[-1].result
    assert events[-1].WhichOneof("kind") == "result"
    assert result.steps_completed == 10
    assert result.preference_metrics.pairwise_accuracy == pytest.approx(end["heldout/pairwise_accuracy"])
    assert result.start_reward.mean == pytest.approx(0.5) and result.end_reward.mean > 0.6
    assert len(result.start_reward.per_prompt) == 16
    pm = result.preference_metrics  # the per-unit values behind each mean, for the agent's CIs
    assert len(pm.per_group_win) == len(pm.per_group_margin) == 16 and len(pm.per_prompt_consistency) == 8
    assert sum(pm.per_group_win) / 16 == pytest.approx(pm.group_win_rate)
    assert sum(pm.per_group_margin) / 16 == pytest.approx(pm.win_margin)
    assert all(0 <= w <= 1 for w in pm.per_group_win)
    assert 0 < result.trainable_params < result.total_params
    paths = {a.path for a in result.artifacts}
    assert {"adapter/adapter_config.json", "adapter/adapter_model.safetensors", "pref_train.jsonl",
            "preference-vs-step.csv", "summary.json"} <= paths
    adapter_cfg = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert (adapter_cfg["r"], adapter_cfg["lora_alpha"], sorted(adapter_cfg["target_modules"])) == (
        64, 128, ["q_proj", "v_proj"])

    pairs = [json.loads(line) for line in (run_dir / "pref_train.jsonl").read_text().splitlines()]
    assert len(pairs) == 32 * 6  # C(4, 2) ordered pairs per group
    assert all(p["chosen_rank"] < p["rejected_rank"] for p in pairs)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["state"] == "SUCCEEDED" and summary["train_pairs"] == 192 and summary["held_out_groups"] == 16
    assert summary["start_preference_metrics"]["pairwise_accuracy"] == 0.5
    assert not list(run_dir.glob(".*.tmp"))  # every file was renamed into place


@pytest.mark.slow
def test_cancel_keeps_a_checkpoint_and_the_adapter(tmp_path, tiny_model_home, monkeypatch):
    monkeypatch.setenv("PY_TRAINER_HOME", str(tiny_model_home))
    req = preference_request(dataset={"inline": {"groups": aml_groups("train", 10)}},
                             preference={"num_held_out_groups": 2},
                             grpo={"max_steps": 50, "per_device_train_batch_size": 2, "logging_steps": 1})
    run_dir = write_run(tmp_path, "pref-cancel", req)
    calls = {"n": 0}

    def should_stop() -> bool:  # False for the check before training, then a cancel arrives
        calls["n"] += 1
        return calls["n"] > 1

    events: list[pb.RunEvent] = []
    assert train_run(run_dir, tmp_path, events.append, should_stop) == pb.RUN_STATE_CANCELLED
    result = events[-1].result
    assert result.steps_completed == 1
    assert not result.HasField("preference_metrics") and result.HasField("start_reward")
    assert [e.checkpoint.path for e in events if e.WhichOneof("kind") == "checkpoint"] == ["checkpoints/checkpoint-1"]
    assert (run_dir / "adapter" / "adapter_model.safetensors").is_file()
    assert json.loads((run_dir / "summary.json").read_text())["state"] == "CANCELLED"

    # the cancelled run's adapter can sample groups for the next annotation round
    out = tmp_path / "next.jsonl"
    req = pb.SampleGroupsRequest(prompts=[aml_groups("test", 1)[0]["prompt"]], k=2, max_new_tokens=8,
                                 adapter=pb.AdapterRef(path="runs/pref-cancel/adapter"))
    assert sample_groups_to_jsonl(req, out, tmp_path) == 1
    row = json.loads(out.read_text())
    assert row["metadata"]["adapter"] == "runs/pref-cancel/adapter" and len(row["responses"]) == 2


# ---------------------------------------------------------------------------------------------
# Sampling groups for annotators


@pytest.mark.slow
def test_sample_groups_three_strategies(tmp_path, tiny_model_home, monkeypatch):
    monkeypatch.setenv("PY_TRAINER_HOME", str(tiny_model_home))
    prompts = [g["prompt"] for g in aml_groups("test", 2)]

    ladder = pb.SampleGroupsRequest(prompts=prompts, k=4, max_new_tokens=12, seed=3)
    eff, _ = validate_sample_request(ladder, tmp_path)
    assert list(eff.top_p_ladder) == pytest.approx([0.95, 0.85, 0.75, 0.65])
    out = tmp_path / "ladder.jsonl"
    assert sample_groups_to_jsonl(ladder, out, tmp_path) == 2
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for row, prompt in zip(rows, prompts):
        check_group(row, need_ranks=False)
        assert row["prompt"] == prompt and row["ranks"] == []
        assert [r["id"] for r in row["responses"]] == ["r0", "r1", "r2", "r3"]
        meta = row["metadata"]
        assert meta["strategy"] == "top_p_ladder" and [m["top_p"] for m in meta["responses"]] == [0.95, 0.85, 0.75, 0.65]
        assert len({m["seed"] for m in meta["responses"]}) == 4  # each response has its own seed
    again = tmp_path / "again.jsonl"
    sample_groups_to_jsonl(ladder, again, tmp_path)
    assert again.read_text() == out.read_text()  # reproducible from the seed
    # a prompt's responses do not depend on where it sits in the request
    sample_groups_to_jsonl(pb.SampleGroupsRequest(prompts=prompts[::-1], k=4, max_new_tokens=12, seed=3),
                           again, tmp_path)
    assert json.loads(again.read_text().splitlines()[1])["responses"] == rows[0]["responses"]

    suffixes = ["", "\nAnswer with the label only.", "\nName the strongest red flag first.", "\nBe brief."]
    req = pb.SampleGroupsRequest(prompts=prompts[:1], k=4, max_new_tokens=12,
                                 strategy=pb.SAMPLING_STRATEGY_PROMPT_SUFFIX, prompt_suffixes=suffixes)
    sample_groups_to_jsonl(req, out, tmp_path)
    row = json.loads(out.read_text())
    assert row["prompt"] == prompts[0]  # the group keeps the original prompt
    assert [m["suffix"] for m in row["metadata"]["responses"]] == suffixes

    req = pb.SampleGroupsRequest(prompts=prompts[:1], k=2, max_new_tokens=12,
                                 strategy=pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K, overgenerate_n=6,
                                 scorer=pb.RewardSpec(name="format"))
    sample_groups_to_jsonl(req, out, tmp_path)
    row = json.loads(out.read_text())
    meta = row["metadata"]
    assert meta["scorer"] == "format" and meta["overgenerate_n"] == 6 and len(row["responses"]) == 2
    scores = [m["score"] for m in meta["responses"]]
    assert scores == sorted(scores, reverse=True)

    async def collect():
        registry = SimpleNamespace(data_root=tmp_path)
        return [r.group async for r in sample_groups_stream(ladder, registry)]

    streamed = asyncio.run(collect())
    assert [[r.text for r in g.responses] for g in streamed] == [[r["text"] for r in row["responses"]] for row in rows]
    assert all(not g.ranks for g in streamed)


@pytest.mark.parametrize("fields,field", [
    ({"k": 1}, "k"),
    ({"prompts": ["case", "  "]}, "prompts[1]"),
    ({"prompts": []}, "prompts"),
    ({"top_p_ladder": [0.9, 0.8, 0.7]}, "top_p_ladder"),
    ({"top_p_ladder": [0.9, 0.8, 0.7, 1.5]}, "top_p_ladder[3]"),
    ({"strategy": pb.SAMPLING_STRATEGY_PROMPT_SUFFIX, "prompt_suffixes": ["a", "b"]}, "prompt_suffixes"),
    ({"prompt_suffixes": ["a", "b", "c", "d"]}, "prompt_suffixes"),
    ({"strategy": pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K, "overgenerate_n": 3}, "overgenerate_n"),
    ({"strategy": pb.SAMPLING_STRATEGY_OVERGENERATE_TOP_K, "scorer": pb.RewardSpec(name="nope")}, "scorer.name"),
    ({"temperature": 0.0}, "temperature"),
    ({"adapter": pb.AdapterRef(path="../elsewhere")}, "adapter.path"),
])
def test_sample_request_errors_name_the_field(tmp_path, fields, field):
    base = {"prompts": ["case"], "k": 4}
    base.update(fields)
    with pytest.raises(InvalidArgument) as ei:
        validate_sample_request(pb.SampleGroupsRequest(**base), tmp_path)
    assert ei.value.field == field, str(ei.value)


def test_sample_request_missing_adapter_is_not_found(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound) as ei:
        validate_sample_request(pb.SampleGroupsRequest(prompts=["case"], k=2, adapter=pb.AdapterRef(path="empty")),
                                tmp_path)
    assert ei.value.field == "adapter.path"


@pytest.mark.slow
def test_pref_train_pairs_are_exactly_what_trl_keeps(tmp_path, tiny_model_dir):
    """_fit_pairs predicts DPOTrainer's own drop of pairs whose prompt fills max_length."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from py_trainer.data.preference_data import group_from_json
    from py_trainer.training.train_preference import expand_pairs, fit_pairs

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    groups = [group_from_json(g) for g in aml_groups("train", 12)]
    pairs = expand_pairs(groups)
    lengths = sorted(len(tok(g.prompt)["input_ids"]) for g in groups)
    max_length = lengths[len(lengths) // 2]  # about half the prompts fill it
    kept, dropped, truncated = fit_pairs(pairs, tok, max_length)
    assert 0 < dropped < len(pairs) and 0 < truncated <= len(kept)

    cfg = DPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, max_length=max_length,
                    report_to=[], disable_tqdm=True, gradient_checkpointing=False)
    trainer = DPOTrainer(model=AutoModelForCausalLM.from_pretrained(tiny_model_dir), args=cfg,
                         train_dataset=Dataset.from_list([{k: p[k] for k in ("prompt", "chosen", "rejected")}
                                                          for p in pairs]),
                         processing_class=tok, peft_config=LoraConfig(r=4, target_modules=["q_proj"]))
    kept_by_trl = [tok.decode(ex["prompt_ids"]) for ex in trainer.train_dataset]
    assert kept_by_trl == [p["prompt"] for p in kept]
