"""Evaluate: base + adapter on one load, per-task graded samples, and its refusals."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from _builders import small_request
from _sidecar import REPO, running_sidecar, sidecar_env
from py_trainer.core import task_rewards
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow  # one real sidecar evaluates the embedded model


TASKS = REPO / "agent-evals" / "tasks" / "aml_typology.jsonl"


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory, tiny_model_home):
    tmp = tmp_path_factory.mktemp("eval")
    data = tmp / "data"
    data.mkdir()
    shutil.copy(TASKS, data / "tasks.jsonl")
    lines = TASKS.read_text().splitlines()[:6]
    lines[4] = lines[4].replace('"prompt"', '"prompt_typo"')
    (data / "bad.jsonl").write_text("\n".join(lines) + "\n")
    with running_sidecar(tmp, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
        with grpc.insecure_channel(sc.address) as ch:
            stub = pb_grpc.TrainerServiceStub(ch)
            final = [r.event for r in stub.Train(small_request("trained", max_steps=2), timeout=600)][-1]
            assert final.state_change.state == pb.RUN_STATE_SUCCEEDED, final.state_change.reason
        yield sc


def evaluate(sc, **fields):
    req = json_format.ParseDict(fields, pb.EvaluateRequest())
    with grpc.insecure_channel(sc.address) as ch:
        return [r for r in pb_grpc.TrainerServiceStub(ch).Evaluate(req, timeout=600)]


def test_base_and_adapter_on_one_load(sidecar):
    shutil.copytree(sidecar.runs_root / "trained" / "adapter", sidecar.data_root / "my-adapter")
    out = evaluate(sidecar, tasks={"jsonl_path": "tasks.jsonl", "split": "test", "limit": 12},
                   adapters=[{"name": "adapter", "run_id": "trained"}, {"name": "copy", "path": "my-adapter"}],
                   graders=[{"name": "exact_match"}, {"name": "exact_match_lenient"}, {"name": "format"}],
                   samples_per_task=2, temperature=1.0, seed=5, batch_size=5)
    progress = [r.progress for r in out if r.HasField("progress")]
    assert out[-1].HasField("result") and sum(r.HasField("result") for r in out) == 1
    assert {p.variant for p in progress} == {"base", "adapter", "copy"}
    assert all(p.tasks_total == 12 for p in progress) and max(p.tasks_done for p in progress) == 12
    res = out[-1].result
    assert [v.name for v in res.variants] == ["base", "adapter", "copy"]
    rows = [json.loads(l) for l in TASKS.read_text().splitlines()]
    test_rows = [r for r in rows if r["split"] == "test"][:12]
    for v in res.variants:
        assert [t.task_id for t in v.tasks] == [r["id"] for r in test_rows]
        for t, row in zip(v.tasks, test_rows):
            assert len(t.samples) == 2
            for s in t.samples:
                # Scores are the registry graders' verdicts on that exact completion.
                for name in ("exact_match", "exact_match_lenient", "format"):
                    want = task_rewards.build_reward({"name": name}).score(s.completion, row["answers"])
                    assert s.scores[name] == want
        per_task = [sum(s.scores["exact_match"] for s in t.samples) / 2 for t in v.tasks]
        assert math.isclose(v.mean_scores["exact_match"], sum(per_task) / len(per_task))
    # The same adapter loaded twice under two names generates the same completions.
    a, c = res.variants[1], res.variants[2]
    assert [s.completion for t in a.tasks for s in t.samples] == [s.completion for t in c.tasks for s in t.samples]


def test_greedy_variants_decoded_together_grade_what_each_variant_gives_alone(sidecar):
    """A greedy Evaluate of the base and two adapters decodes them in shared batches
    (models/variants.py); every variant's completions and scores are those of an Evaluate of that
    variant alone, and progress is reported for each as its decode groups end."""
    shutil.copytree(sidecar.runs_root / "trained" / "adapter", sidecar.data_root / "greedy-copy")
    tasks = {"jsonl_path": "tasks.jsonl", "split": "test", "limit": 10}
    adapters = [{"name": "adapter", "run_id": "trained"}, {"name": "copy", "path": "greedy-copy"}]
    out = evaluate(sidecar, tasks=tasks, adapters=adapters, temperature=0, batch_size=4, max_new_tokens=16)
    res = out[-1].result
    alone = {"base": evaluate(sidecar, tasks=tasks, temperature=0, batch_size=4, max_new_tokens=16)[-1].result}
    for ref in adapters:
        alone[ref["name"]] = evaluate(sidecar, tasks=tasks, adapters=[ref], skip_base=True, temperature=0,
                                      batch_size=4, max_new_tokens=16)[-1].result
    assert [v.name for v in res.variants] == ["base", "adapter", "copy"]
    for v in res.variants:
        [want] = alone[v.name].variants
        assert v == want, v.name
    progress = [r.progress for r in out if r.HasField("progress")]
    for name in ("base", "adapter", "copy"):  # after each decode group of whole batches of 4
        done = [p.tasks_done for p in progress if p.variant == name]
        assert done == sorted(set(done)) and done[-1] == 10 and all(d % 4 == 0 for d in done[:-1]), done


def test_result_carries_the_fingerprint_and_each_adapter_identity(sidecar):
    """The run-time half of the fingerprint (issue 21) and each adapter's sha256 and step."""
    import hashlib

    from py_trainer.models.loading import weights_sha256

    out = evaluate(sidecar, tasks={"jsonl_path": "tasks.jsonl", "split": "test", "limit": 3},
                   adapters=[{"name": "adapter", "run_id": "trained"}], batch_size=3)
    res = out[-1].result
    fp = res.fingerprint
    assert fp.model == res.base_model and fp.model.startswith("/")
    assert fp.weights_sha256 == weights_sha256(Path(fp.model)) and len(fp.weights_sha256) == 64
    assert fp.revision == ""  # a local folder, not a hub snapshot
    assert fp.prompt_format in ("raw", "chat")
    assert (fp.chat_template_sha256 != "") == (fp.prompt_format == "chat")
    assert (fp.device, fp.dtype, fp.batch_size, fp.top_p) == ("cpu", "fp32", 3, 1.0)
    assert set(fp.library_versions) == {"torch", "transformers", "peft", "trl"}
    assert all(fp.library_versions.values())
    [a] = res.adapters
    weights = (sidecar.runs_root / "trained" / "adapter" / "adapter_model.safetensors").read_bytes()
    assert (a.name, a.run_id, a.step) == ("adapter", "trained", 2)
    assert a.sha256 == hashlib.sha256(weights).hexdigest()
    # the same request again gives the same fingerprint (the weights are hashed once and cached)
    assert evaluate(sidecar, tasks={"jsonl_path": "tasks.jsonl", "split": "test", "limit": 3},
                    adapters=[{"name": "adapter", "run_id": "trained"}], batch_size=3)[-1].result.fingerprint == fp


def test_evaluate_refusals(sidecar):
    cases = [
        ({"adapters": [{"name": "a", "path": "no-such-adapter"}]}, grpc.StatusCode.NOT_FOUND, "adapters[0].path:"),
        ({"adapters": [{"name": "a", "run_id": "no-such-run"}]}, grpc.StatusCode.NOT_FOUND, "adapters[0].run_id:"),
        ({"adapters": [{"name": "a", "path": "../outside"}]}, grpc.StatusCode.INVALID_ARGUMENT, "adapters[0].path:"),
        ({"adapters": [{"name": "base", "run_id": "trained"}]}, grpc.StatusCode.INVALID_ARGUMENT, "adapters[0].name:"),
        ({"tasks": {"jsonl_path": "bad.jsonl"}}, grpc.StatusCode.INVALID_ARGUMENT, "tasks.jsonl_path:"),
        ({"graders": [{"name": "nope"}]}, grpc.StatusCode.INVALID_ARGUMENT, "graders[0].name:"),
        ({"samples_per_task": 3}, grpc.StatusCode.INVALID_ARGUMENT, "samples_per_task:"),
        ({"temperature": -1}, grpc.StatusCode.INVALID_ARGUMENT, "temperature:"),
    ]
    for fields, code, prefix in cases:
        body = {"tasks": {"jsonl_path": "tasks.jsonl", "limit": 4}, **fields}
        with pytest.raises(grpc.RpcError) as ei:
            evaluate(sidecar, **body)
        assert ei.value.code() == code, (fields, ei.value.details())
        assert ei.value.details().startswith(prefix), ei.value.details()
        if prefix == "tasks.jsonl_path:":
            assert "bad.jsonl line 5" in ei.value.details()


def test_checkpoint_step_evaluates_that_checkpoint(sidecar):
    """AdapterRef.checkpoint_step: the run's complete checkpoint at that step, not its final adapter;
    EvaluatedAdapter.step says which; a step with no complete checkpoint is NOT_FOUND naming it."""
    import hashlib

    ckpt = sidecar.runs_root / "trained" / "checkpoints" / "checkpoint-2"
    out = evaluate(sidecar, tasks={"jsonl_path": "tasks.jsonl", "split": "test", "limit": 2},
                   adapters=[{"name": "ckpt", "run_id": "trained", "checkpoint_step": 2}], batch_size=2)
    [a] = out[-1].result.adapters
    assert (a.name, a.run_id, a.step) == ("ckpt", "trained", 2)
    assert a.sha256 == hashlib.sha256((ckpt / "adapter_model.safetensors").read_bytes()).hexdigest()
    assert [v.name for v in out[-1].result.variants] == ["base", "ckpt"]
    for ref, code, want in [
        ({"name": "c", "run_id": "trained", "checkpoint_step": 1}, grpc.StatusCode.NOT_FOUND,
         "adapters[0].checkpoint_step: run 'trained' has no complete checkpoint at step 1 "
         "(its complete checkpoints are at steps 2)"),
        ({"name": "c", "path": "my-adapter", "checkpoint_step": 2}, grpc.StatusCode.INVALID_ARGUMENT,
         "adapters[0].checkpoint_step: only applies to an adapter given by run_id"),
    ]:
        with pytest.raises(grpc.RpcError) as ei:
            evaluate(sidecar, tasks={"jsonl_path": "tasks.jsonl", "limit": 2}, adapters=[ref])
        assert ei.value.code() == code, ei.value.details()
        assert ei.value.details() == want
