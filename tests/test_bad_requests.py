"""A corpus of bad requests across every RPC, each with the status it must get and the field its
message must start with, sent to ONE real sidecar (so the whole corpus takes seconds).

Covers what a third-party client built from reflection alone can send: bytes that are not a valid
message (bad UTF-8, a corrupt or truncated wire, a Struct nested past protobuf's limit), files that
are not UTF-8 or nest too deeply, model and adapter folders that are not what they claim, hub ids
while offline, LoRA targets the model does not have, run ids with a trailing newline, and the
cross-field rules of every request. Nothing may be created for a refused request.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from _bad_models import write_bad_models
from _builders import make_run
from _sidecar import REPO, running_sidecar, sidecar_env
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.run_request import REQUEST_DIGEST_FILE

TASKS = REPO / "agent-evals" / "tasks" / "aml_typology.jsonl"
SERVICE = "/grpo.trainer.v1.TrainerService/"
IA, NF, FP, AE = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION,
                  grpc.StatusCode.ALREADY_EXISTS)
STREAMING = {"Train", "WatchRun", "DownloadArtifact", "Evaluate", "SampleGroups"}
MESSAGES = {"Train": pb.TrainRequest, "WatchRun": pb.WatchRunRequest, "GetRun": pb.GetRunRequest,
            "ListRuns": pb.ListRunsRequest, "CancelRun": pb.CancelRunRequest,
            "DownloadArtifact": pb.DownloadArtifactRequest, "Evaluate": pb.EvaluateRequest,
            "SampleGroups": pb.SampleGroupsRequest, "ResumeRun": pb.ResumeRunRequest,
            "DeleteRun": pb.DeleteRunRequest}


def rows(n=30):
    return [{"id": o["id"], "prompt": o["prompt"], "answers": o["answers"]}
            for o in map(json.loads, TASKS.read_text().splitlines()[:n])]


def merged(base: dict, over: dict) -> dict:
    out = json.loads(json.dumps(base))
    for key, value in over.items():
        node = out
        *parents, last = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return out


TRAIN = {"dataset": {"inline": {"rows": rows()}}, "grpo": {"max_steps": 2}, "held_out": {"num_prompts": 4}}
EVAL = {"tasks": {"jsonl_path": "tasks.jsonl", "limit": 2}}
SAMPLE = {"prompts": ["Case: a b c", "Case: d e f"], "k": 2}


def train(**over):
    return ("Train", merged(TRAIN, over))


def evaluate(**over):
    return ("Evaluate", merged(EVAL, over))


def sample(**over):
    return ("SampleGroups", merged(SAMPLE, over))


def nested_struct(depth: int) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    cur = s
    for _ in range(depth):
        cur = cur.fields["a"].struct_value
    return s


def raw_train_bad_utf8_prompt() -> bytes:
    req = json_format.ParseDict(TRAIN, pb.TrainRequest())
    req.dataset.inline.rows[0].prompt = "MARKER"
    return req.SerializeToString().replace(b"MARKER", b"MA\xffKER")


def raw_with_bad_string(message_class, **fields) -> bytes:
    """`message_class(**fields)` with the string value "MARKER" made invalid UTF-8 on the wire."""
    return message_class(**fields).SerializeToString().replace(b"MARKER", b"MA\xc3\x28ER")


def raw_train_nested_params(depth: int) -> bytes:
    req = json_format.ParseDict(TRAIN, pb.TrainRequest())
    req.rewards.add(name="exact_match", weight=1.0).params.CopyFrom(nested_struct(depth))
    return req.SerializeToString()


def raw_eval_bad_utf8_row() -> bytes:
    req = pb.EvaluateRequest()
    req.tasks.inline.rows.add(id="t", prompt="MARKER", answers=["a"])
    return req.SerializeToString().replace(b"MARKER", b"MA\xfe\xfeER")


def truncated(message_class, body: dict) -> bytes:
    return json_format.ParseDict(body, message_class()).SerializeToString()[:-3]


CONTENT_ERRORS = ("latin1.jsonl", "deep.jsonl", "nested40.jsonl", "notobj.jsonl", "broken.jsonl")
GARBAGE = b"\xff\xff\xff\xff\xff"
UNKNOWN_WIRE_TYPE = b"\x0f\x01"  # field 1, wire type 7

# (rpc, request dict or raw bytes, status, field prefix)
CASES = [
    # -- Train: run ids, models, LoRA targets, files, knobs -----------------------------------
    train(run_id="ok\n") + (IA, "run_id:"),
    train(run_id="x" * 65) + (IA, "run_id:"),
    train(run_id="-leading") + (IA, "run_id:"),
    train(run_id="a/b") + (IA, "run_id:"),
    train(run_id="sp ace") + (IA, "run_id:"),
    train(run_id="done") + (AE, "run_id:"),
    train(base_model="nomodel") + (FP, "base_model:"),
    train(base_model="badconfig") + (FP, "base_model:"),
    train(base_model="notype") + (FP, "base_model:"),
    train(base_model="notok") + (FP, "base_model:"),
    train(base_model="tasks.jsonl") + (FP, "base_model:"),
    train(base_model="some-org/some-model") + (NF, "base_model:"),
    train(base_model="a/b/c") + (IA, "base_model:"),
    train(base_model="../outside") + (IA, "base_model:"),
    train(base_model="/etc") + (IA, "base_model:"),
    train(**{"lora.target_modules": ["no_such_proj"]}) + (IA, "lora.target_modules[0]:"),
    train(**{"lora.target_modules": ["q_proj", "attention"]}) + (IA, "lora.target_modules[1]:"),
    train(**{"lora.target_modules": ["q_proj", "bad module"]}) + (IA, "lora.target_modules[1]:"),
    train(dataset={"jsonl_path": "latin1.jsonl"}) + (IA, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "deep.jsonl"}) + (IA, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "nested40.jsonl"}) + (IA, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "notobj.jsonl"}) + (IA, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "broken.jsonl"}) + (IA, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "missing.jsonl"}) + (NF, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "escape-link/passwd"}) + (IA, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "subdir"}) + (IA, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "../../etc/passwd"}) + (IA, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "/etc/passwd"}) + (IA, "dataset.jsonl_path:"),
    train(dataset={"jsonl_path": "tasks.jsonl", "split": "nope"}) + (IA, "dataset:"),
    ("Train", {k: v for k, v in TRAIN.items() if k != "dataset"}, IA, "dataset:"),
    train(dataset={}) + (IA, "dataset:"),
    train(dataset={"inline": {"rows": []}}) + (IA, "dataset:"),
    train(dataset={"inline": {"rows": [{"id": "x", "prompt": "  ", "answers": ["a"]}] + rows()}})
    + (IA, "dataset.inline.rows[0].prompt:"),
    train(dataset={"inline": {"rows": rows() + [{"id": "y", "prompt": "p", "answers": []}]}})
    + (IA, "dataset.inline.rows[30].answers:"),
    train(run_id="../escape") + (IA, "run_id:"),
    train(mode=9) + (IA, "mode:"),
    train(rewards=[{"name": "nope"}]) + (IA, "rewards[0].name:"),
    train(rewards=[{"name": "exact_match", "weight": "Infinity"}]) + (IA, "rewards[0].weight:"),
    train(rewards=[{"name": "exact_match", "weight": "NaN"}]) + (IA, "rewards[0].weight:"),
    train(rewards=[{"name": "exact_match", "params": {"no_such_param": 1}}]) + (IA, "rewards[0].params.no_such_param:"),
    train(rewards=[{"name": "exact_match"}, {"name": "exact_match"}]) + (IA, "rewards[1].name:"),
    # ranges (the range message itself, num_generations' included, is pinned in test_config.py)
    train(**{"grpo.beta": -1}) + (IA, "grpo.beta:"),
    train(**{"grpo.epsilon": 0}) + (IA, "grpo.epsilon:"),
    train(**{"grpo.scale_rewards": "per-token"}) + (IA, "grpo.scale_rewards:"),
    train(**{"grpo.temperature": 0}) + (IA, "grpo.temperature:"),
    train(**{"grpo.top_p": 1.5}) + (IA, "grpo.top_p:"),
    train(**{"grpo.warmup_ratio": 1.0}) + (IA, "grpo.warmup_ratio:"),
    train(**{"held_out.samples_per_prompt": 0}) + (IA, "held_out.samples_per_prompt:"),
    train(**{"lora.dropout": 1.0}) + (IA, "lora.dropout:"),
    # the group must be complete: 12 completions per step with 8 per prompt
    train(**{"grpo.per_device_train_batch_size": 12}) + (IA, "grpo.per_device_train_batch_size:"),
    # no CUDA here: what the machine cannot honour is FAILED_PRECONDITION (skipped where CUDA exists)
    train(**{"runtime.device": "cuda"}) + (FP, "runtime.device:"),
    train(**{"grpo.learning_rate": 0}) + (IA, "grpo.learning_rate:"),
    train(**{"grpo.top_p": 0}) + (IA, "grpo.top_p:"),
    train(**{"grpo.loss_type": "x"}) + (IA, "grpo.loss_type:"),
    train(**{"grpo.max_steps": 0}) + (IA, "grpo.max_steps:"),
    train(**{"lora.r": 0}) + (IA, "lora.r:"),
    train(**{"lora.dropout": 1.5}) + (IA, "lora.dropout:"),
    train(**{"runtime.device": "tpu"}) + (IA, "runtime.device:"),
    train(**{"runtime.precision": "int3"}) + (IA, "runtime.precision:"),
    # the embedded model's tokenizer has no chat template: refused up front, before any run exists
    train(**{"runtime.prompt_format": "chat"}) + (FP, "runtime.prompt_format:"),
    train(**{"held_out.num_prompts": 30}) + (IA, "held_out.num_prompts:"),
    ("Train", raw_train_bad_utf8_prompt(), IA, "dataset.inline.rows[0].prompt:"),
    ("Train", raw_with_bad_string(pb.TrainRequest, run_id="MARKER"), IA, "run_id:"),
    ("Train", raw_with_bad_string(pb.TrainRequest, base_model="MARKER"), IA, "base_model:"),
    ("Train", raw_train_nested_params(200), IA, "rewards[0].params:"),
    ("Train", truncated(pb.TrainRequest, TRAIN), IA, "request:"),
    ("Train", GARBAGE, IA, "request:"),
    ("Train", UNKNOWN_WIRE_TYPE, IA, "request:"),
    # -- WatchRun -------------------------------------------------------------------------
    ("WatchRun", {"run_id": ""}, IA, "run_id:"),
    ("WatchRun", {"run_id": "nope"}, NF, "run_id:"),
    ("WatchRun", {"run_id": "done\n"}, IA, "run_id:"),
    ("WatchRun", {"run_id": "../done"}, IA, "run_id:"),
    ("WatchRun", {"run_id": "done", "after_seq": 99}, IA, "after_seq:"),
    ("WatchRun", {"run_id": "damaged", "after_seq": 1}, IA, "after_seq:"),
    ("WatchRun", raw_with_bad_string(pb.WatchRunRequest, run_id="MARKER"), IA, "run_id:"),
    ("WatchRun", GARBAGE, IA, "request:"),
    # -- GetRun ---------------------------------------------------------------------------
    ("GetRun", {"run_id": ""}, IA, "run_id:"),
    ("GetRun", {"run_id": "done\n"}, IA, "run_id:"),
    ("GetRun", {"run_id": "x" * 65}, IA, "run_id:"),
    ("GetRun", {"run_id": "a/../b"}, IA, "run_id:"),
    ("GetRun", {"run_id": ".hidden"}, IA, "run_id:"),
    ("GetRun", {"run_id": "nope"}, NF, "run_id:"),
    ("GetRun", raw_with_bad_string(pb.GetRunRequest, run_id="MARKER"), IA, "run_id:"),
    ("GetRun", truncated(pb.GetRunRequest, {"run_id": "done"}), IA, "request:"),
    ("GetRun", UNKNOWN_WIRE_TYPE, IA, "request:"),
    # -- ListRuns -------------------------------------------------------------------------
    ("ListRuns", {"page_size": 501}, IA, "page_size:"),
    ("ListRuns", {"page_token": "abc"}, IA, "page_token:"),
    ("ListRuns", {"page_token": "-1"}, IA, "page_token:"),
    ("ListRuns", {"page_token": "999"}, IA, "page_token:"),
    ("ListRuns", {"state": 99}, IA, "state:"),
    ("ListRuns", raw_with_bad_string(pb.ListRunsRequest, page_token="MARKER"), IA, "page_token:"),
    ("ListRuns", GARBAGE, IA, "request:"),
    # -- CancelRun ------------------------------------------------------------------------
    ("CancelRun", {"run_id": ""}, IA, "run_id:"),
    ("CancelRun", {"run_id": "done\n"}, IA, "run_id:"),
    ("CancelRun", {"run_id": "nope"}, NF, "run_id:"),
    ("CancelRun", {"run_id": "done"}, FP, "run_id:"),
    ("CancelRun", {"run_id": "failed-run"}, FP, "run_id:"),
    ("CancelRun", {"run_id": "damaged"}, FP, "run_id:"),
    ("CancelRun", raw_with_bad_string(pb.CancelRunRequest, run_id="MARKER"), IA, "run_id:"),
    ("CancelRun", GARBAGE, IA, "request:"),
    # -- ResumeRun ------------------------------------------------------------------------
    ("ResumeRun", {"run_id": ""}, IA, "run_id:"),
    ("ResumeRun", {"run_id": "done\n"}, IA, "run_id:"),
    ("ResumeRun", {"run_id": "nope"}, NF, "run_id:"),
    ("ResumeRun", {"run_id": "done"}, FP, "run_id:"),
    ("ResumeRun", {"run_id": "failed-run"}, FP, "run_id:"),
    ("ResumeRun", {"run_id": "damaged"}, FP, "run_id:"),
    ("ResumeRun", {"run_id": "edited-request"}, FP, "request.json:"),
    ("ResumeRun", raw_with_bad_string(pb.ResumeRunRequest, run_id="MARKER"), IA, "run_id:"),
    ("ResumeRun", GARBAGE, IA, "request:"),
    # -- DeleteRun (a finished run is deleted: only refusals here; tests/test_run_state.py) --
    ("DeleteRun", {"run_id": ""}, IA, "run_id:"),
    ("DeleteRun", {"run_id": "done\n"}, IA, "run_id:"),
    ("DeleteRun", {"run_id": "../done"}, IA, "run_id:"),
    ("DeleteRun", {"run_id": "nope"}, NF, "run_id:"),
    ("DeleteRun", raw_with_bad_string(pb.DeleteRunRequest, run_id="MARKER"), IA, "run_id:"),
    ("DeleteRun", GARBAGE, IA, "request:"),
    # -- DownloadArtifact -----------------------------------------------------------------
    ("DownloadArtifact", {"run_id": "done", "path": ""}, IA, "path:"),
    ("DownloadArtifact", {"run_id": "done", "path": "../failed-run/request.json"}, IA, "path:"),
    ("DownloadArtifact", {"run_id": "done", "path": "/etc/passwd"}, IA, "path:"),
    ("DownloadArtifact", {"run_id": "done", "path": "~/x"}, IA, "path:"),
    ("DownloadArtifact", {"run_id": "done", "path": "a\u0000b"}, IA, "path:"),
    ("DownloadArtifact", {"run_id": "done", "path": "nope.bin"}, NF, "path:"),
    ("DownloadArtifact", {"run_id": "done", "path": "sub"}, IA, "path:"),
    ("DownloadArtifact", {"run_id": "done", "path": "request.json", "offset": 10**9}, IA, "offset:"),
    ("DownloadArtifact", {"run_id": "nope", "path": "request.json"}, NF, "run_id:"),
    ("DownloadArtifact", {"run_id": "done\n", "path": "request.json"}, IA, "run_id:"),
    ("DownloadArtifact", {"run_id": "damaged", "path": "request.json"}, FP, "run_id:"),
    ("DownloadArtifact", raw_with_bad_string(pb.DownloadArtifactRequest, run_id="done", path="MARKER"), IA, "path:"),
    ("DownloadArtifact", GARBAGE, IA, "request:"),
    # -- Evaluate -------------------------------------------------------------------------
    ("Evaluate", {}, IA, "tasks:"),
    evaluate(tasks={"jsonl_path": "latin1.jsonl"}) + (IA, "tasks.jsonl_path:"),
    evaluate(tasks={"jsonl_path": "deep.jsonl"}) + (IA, "tasks.jsonl_path:"),
    evaluate(tasks={"jsonl_path": "broken.jsonl"}) + (IA, "tasks.jsonl_path:"),
    evaluate(tasks={"inline": {"rows": [{"id": "a", "prompt": "p", "answers": []}]}}) + (IA, "tasks.inline.rows[0].answers:"),
    evaluate(adapters=[{"name": "a", "path": "badadapter"}]) + (FP, "adapters[0].path:"),
    evaluate(adapters=[{"name": "a", "path": "noweights-adapter"}]) + (FP, "adapters[0].path:"),
    evaluate(adapters=[{"name": "a", "path": "subdir"}]) + (NF, "adapters[0].path:"),
    evaluate(adapters=[{"name": "a", "path": "../outside"}]) + (IA, "adapters[0].path:"),
    evaluate(adapters=[{"name": "a", "run_id": "failed-run"}]) + (FP, "adapters[0].run_id:"),
    evaluate(adapters=[{"name": "a", "run_id": "corrupt-adapter-run"}]) + (FP, "adapters[0].run_id:"),
    evaluate(adapters=[{"name": "a", "run_id": "done"}]) + (NF, "adapters[0].run_id:"),
    evaluate(adapters=[{"name": "a", "run_id": "done\n"}]) + (IA, "adapters[0].run_id:"),
    evaluate(adapters=[{"name": "a", "run_id": "damaged"}]) + (FP, "adapters[0].run_id:"),
    evaluate(adapters=[{"name": "a"}]) + (IA, "adapters[0]:"),
    evaluate(adapters=[{"name": "", "path": "badadapter"}]) + (IA, "adapters[0].name:"),
    evaluate(adapters=[{"name": "base", "path": "badadapter"}]) + (IA, "adapters[0].name:"),
    evaluate(base_model="nomodel") + (FP, "base_model:"),
    evaluate(base_model="badconfig") + (FP, "base_model:"),
    evaluate(base_model="some-org/some-model") + (NF, "base_model:"),
    evaluate(graders=[{"name": "nope"}]) + (IA, "graders[0].name:"),
    evaluate(temperature=-1) + (IA, "temperature:"),
    evaluate(skip_base=True) + (IA, "skip_base:"),
    evaluate(**{"runtime.device": "tpu"}) + (IA, "runtime.device:"),
    evaluate(**{"runtime.prompt_format": "chat"}) + (FP, "runtime.prompt_format:"),
    sample(**{"runtime.prompt_format": "chat"}) + (FP, "runtime.prompt_format:"),
    # damaged adapters and models (issue 22, item 7): each was UNKNOWN ("Unexpected <class ...>")
    evaluate(adapters=[{"name": "a", "path": "rank-adapter"}]) + (FP, "adapters[0].path: 'rank-adapter': adapter_config.json says r = 8"),
    evaluate(adapters=[{"name": "a", "path": "foreign-adapter"}]) + (FP, "adapters[0].path: 'foreign-adapter': adapter_config.json targets qq_proj"),
    evaluate(adapters=[{"name": "a", "path": "good-adapter"}, {"name": "b", "path": "trunc-adapter"}])
    + (FP, "adapters[1].path: 'trunc-adapter': adapter_model.safetensors is truncated"),
    evaluate(adapters=[{"name": "a", "path": "nan-adapter"}], temperature=1.0, samples_per_task=2)
    + (FP, "adapters[0].path: 'nan-adapter' has non-finite weights (base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight (NaN))"),
    evaluate(base_model="trunc-model") + (FP, "base_model: 'trunc-model': model.safetensors is truncated"),
    sample(adapter={"path": "nan-adapter"}) + (FP, "adapter.path: 'nan-adapter' has non-finite weights"),
    sample(adapter={"path": "rank-adapter"}) + (FP, "adapter.path: 'rank-adapter': adapter_config.json says r = 8"),
    ("Evaluate", raw_eval_bad_utf8_row(), IA, "tasks.inline.rows[0].prompt:"),
    ("Evaluate", raw_with_bad_string(pb.EvaluateRequest, base_model="MARKER"), IA, "base_model:"),
    ("Evaluate", GARBAGE, IA, "request:"),
    # -- SampleGroups ---------------------------------------------------------------------
    sample(prompts=[]) + (IA, "prompts:"),
    sample(prompts=["ok", "  "]) + (IA, "prompts[1]:"),
    sample(k=1) + (IA, "k:"),
    sample(strategy=9) + (IA, "strategy:"),
    sample(strategy="SAMPLING_STRATEGY_OVERGENERATE_TOP_K") + (IA, "scorer:"),
    sample(strategy="SAMPLING_STRATEGY_OVERGENERATE_TOP_K", scorer={"name": "nope"}) + (IA, "scorer.name:"),
    sample(strategy="SAMPLING_STRATEGY_OVERGENERATE_TOP_K", scorer={"name": "format"}, overgenerate_n=1)
    + (IA, "overgenerate_n:"),
    sample(scorer={"name": "format"}) + (IA, "scorer:"),
    sample(top_p_ladder=[0.9]) + (IA, "top_p_ladder:"),
    sample(strategy="SAMPLING_STRATEGY_PROMPT_SUFFIX", prompt_suffixes=["a"]) + (IA, "prompt_suffixes:"),
    sample(prompt_suffixes=["a", "b"]) + (IA, "prompt_suffixes:"),
    sample(base_model="nomodel") + (FP, "base_model:"),
    sample(base_model="some-org/some-model") + (NF, "base_model:"),
    sample(adapter={"path": "badadapter"}) + (FP, "adapter.path:"),
    sample(adapter={"run_id": "failed-run"}) + (FP, "adapter.run_id:"),
    sample(adapter={"run_id": "x\n"}) + (IA, "adapter.run_id:"),
    sample(temperature=0) + (IA, "temperature:"),
    ("SampleGroups", raw_with_bad_string(pb.SampleGroupsRequest, prompts=["fine", "MARKER"], k=2), IA, "prompts[1]:"),
    ("SampleGroups", GARBAGE, IA, "request:"),
]


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory, tiny_model_home, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("bad")
    data, runs = tmp / "data", tmp / "runs"
    data.mkdir()
    shutil.copy(TASKS, data / "tasks.jsonl")
    good = TASKS.read_text().splitlines()[:4]
    (data / "broken.jsonl").write_text("\n".join(good[:2] + ['{"id": "b", "prompt": '] + good[2:]) + "\n")
    (data / "latin1.jsonl").write_bytes((good[0] + "\n").encode() + '{"id": "l", "prompt": "caf\xe9", "answers": ["a"]}\n'.encode("latin-1"))
    (data / "deep.jsonl").write_text(good[0] + "\n" + '{"id": "d", "prompt": "p", "answers": ["a"], "x": ' + "[" * 100000 + "]" * 100000 + "}\n")
    (data / "nested40.jsonl").write_text(good[0] + "\n" + '{"id": "n", "prompt": "p", "answers": ["a"], "x": ' + "[" * 40 + "]" * 40 + "}\n")
    (data / "notobj.jsonl").write_text(good[0] + "\n[1, 2]\n")
    (data / "subdir").mkdir()
    (data / "nomodel").mkdir()
    (data / "nomodel" / "weights.bin").write_bytes(b"\0" * 10)
    for name, cfg in (("badconfig", '{"model_type": "qwen2",'), ("notype", "{}"), ("notok", '{"model_type": "qwen2"}')):
        (data / name).mkdir()
        (data / name / "config.json").write_text(cfg)
    for name in ("badconfig", "notype"):
        (data / name / "tokenizer.json").write_text("{}")
    (data / "badadapter").mkdir()
    (data / "badadapter" / "adapter_config.json").write_text('{"peft_type": "LORA", ')
    (data / "noweights-adapter").mkdir()
    (data / "noweights-adapter" / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("secret\n")
    os.symlink(outside, data / "escape-link")
    make_run(runs, "done")
    (runs / "done" / "sub").mkdir()
    make_run(runs, "failed-run", states=(pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING, pb.RUN_STATE_FAILED))
    edited = make_run(runs, "edited-request", states=(pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING, pb.RUN_STATE_FAILED))
    (edited / REQUEST_DIGEST_FILE).write_text(hashlib.sha256((edited / "request.json").read_bytes()).hexdigest()
                                              + "  request.json\n")
    (edited / "request.json").write_text((edited / "request.json").read_text().replace('"maxSteps": 3', '"maxSteps": 30')
                                         .replace('"max_steps": 3', '"max_steps": 30'))
    bad = make_run(runs, "corrupt-adapter-run")
    (bad / "adapter").mkdir()
    (bad / "adapter" / "adapter_config.json").write_text("{nope")
    make_run(runs, "damaged")
    with open(runs / "damaged" / "events.jsonl", "ab") as f:
        f.write(b"garbage\n")
    write_bad_models(data, tiny_model_dir)  # item 7's damaged adapters and model (tests/_bad_models.py)
    with running_sidecar(tmp, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
        yield sc


def send(channel, rpc: str, request):
    raw = request if isinstance(request, bytes) else json_format.ParseDict(request, MESSAGES[rpc]()).SerializeToString()
    if rpc in STREAMING:
        return list(channel.unary_stream(SERVICE + rpc, request_serializer=None, response_deserializer=None)(raw, timeout=60))
    return channel.unary_unary(SERVICE + rpc, request_serializer=None, response_deserializer=None)(raw, timeout=60)


def test_corpus_size():
    assert len(CASES) >= 100
    assert {c[0] for c in CASES} == set(MESSAGES)


@pytest.mark.slow
@pytest.mark.parametrize("rpc,request_,code,field", CASES,
                         ids=[f"{c[0]}-{i}-{c[3].rstrip(':')}" for i, c in enumerate(CASES)])
def test_bad_request(sidecar, rpc, request_, code, field):
    if field == "runtime.device:" and "cuda" in json.dumps(request_):
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    before = sorted(p.name for p in sidecar.runs_root.iterdir())
    with grpc.insecure_channel(sidecar.address) as ch:
        with pytest.raises(grpc.RpcError) as ei:
            send(ch, rpc, request_)
    assert ei.value.code() == code, ei.value.details()
    assert ei.value.details().startswith(field), ei.value.details()
    if "jsonl_path" in field and any(f in json.dumps(request_) for f in CONTENT_ERRORS):
        assert " line " in ei.value.details(), ei.value.details()  # which line of the file
        if "broken.jsonl" in json.dumps(request_):
            assert "line 3" in ei.value.details(), ei.value.details()
    assert sorted(p.name for p in sidecar.runs_root.iterdir()) == before, "a refused request created something"
