"""The memory preflight against a measured peak (issue 23): for the embedded model and a randomly
initialised Qwen2.5-0.5B-shaped model (its config built here, no hub), one GRPO step through
`py-trainer train --config` on CPU in a child process, its peak RSS (ru_maxrss), the peak of a
child that only imports the libraries (the framework's own footprint, which the estimate leaves
out), and memory_estimate.estimate's total for the same effective request.

    .venv/bin/python scripts/bench_memory.py [--only tiny|qwen|real]

`real` is SmolLM2-135M-Instruct (base_model "smollm2-135m-instruct", issue 27) with the real
recipe's request (agent-evals/demo-real-request.json) cut to one step.

Prints one line per model: estimate, peak RSS, peak minus the import baseline, and the ratio
estimate / (peak - baseline), twice: under glibc's default malloc, and with
MALLOC_MMAP_THRESHOLD_=131072 (a fixed threshold: every block over 128 KiB is its own mapping,
returned to the OS when freed). glibc's default raises the threshold as large blocks are freed, so
later ones come from the heap and stay in RSS after they die: on SmolLM2-135M's recipe that kept
~2.2 GiB more than the live tensors ever held (4038 vs 6243 MiB, docs/real-model.md). The second peak follows live
memory, which is what the estimate models (and what a CUDA device holds, less its allocator's
cache). A benchmark, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

QWEN25_05B = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 151936, "hidden_size": 896,
              "num_hidden_layers": 24, "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
              "tie_word_embeddings": True, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
              "rope_theta": 1000000.0, "hidden_act": "silu"}
IMPORTS = "import torch, transformers, peft, trl, datasets; import py_trainer.server.standalone"


FIXED_MMAP = {"MALLOC_MMAP_THRESHOLD_": "131072"}


def child_peak(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> int:
    """Peak RSS in bytes of one child process (its own ru_maxrss, read in a wrapper)."""
    code = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024); sys.exit(p.returncode)")
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                         env={**os.environ, **(env or {})})
    if out.returncode != 0:
        raise SystemExit(f"bench_memory: {' '.join(args[:4])}... failed:\n{out.stderr[-3000:]}")
    return int(out.stdout.strip().splitlines()[-1])


def qwen_shaped_model(folder: Path) -> Path:
    """A randomly initialised model with Qwen2.5-0.5B's shape and the embedded model's tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    from py_trainer.models.tiny_model import ensure_default_model

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Qwen2Config(**QWEN25_05B))
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(ensure_default_model())).save_pretrained(folder)
    return folder


def request(base_model: str) -> dict:
    from google.protobuf import json_format

    from _builders import small_request

    req = small_request("bench-mem", max_steps=1, save_steps=1)
    req.base_model = base_model
    req.held_out.num_prompts, req.held_out.samples_per_prompt = 2, 2
    req.runtime.report_to.append("none")
    return json_format.MessageToDict(req, preserving_proto_field_name=True)


def estimate_total(config: Path, data_root: Path, model_folder: Path) -> tuple[int, list]:
    from google.protobuf import json_format

    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
    from py_trainer.server.validate import validate_train_request
    from py_trainer.workers import memory_estimate as me

    eff = validate_train_request(json_format.ParseDict(json.loads(config.read_text()), pb.TrainRequest()), data_root)
    comps = me.estimate(eff, me.read_config(model_folder), precision="fp32",
                        prompt_tokens=me.longest_prompt_tokens(eff, data_root))
    return sum(c.bytes for c in comps), comps


def real_request() -> dict:
    """The real recipe's request (proto JSON) cut to one step, as proto field names."""
    from google.protobuf import json_format

    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

    req = json_format.Parse((REPO / "agent-evals" / "demo-real-request.json").read_text(), pb.TrainRequest())
    req.grpo.max_steps, req.grpo.save_steps = 1, 1
    req.held_out.num_prompts, req.held_out.samples_per_prompt = 2, 2
    return json_format.MessageToDict(req, preserving_proto_field_name=True)


def measure(name: str, key: str, base_model: str, model_folder: Path, work: Path, baseline: int,
            body: dict | None = None, data_root: Path | None = None) -> None:
    config = work / f"{key}.json"
    config.write_text(json.dumps(body or request(base_model)))
    total, comps = estimate_total(config, data_root or work, model_folder)
    mib = lambda b: f"{b / 2**20:.0f} MiB"  # noqa: E731
    parts = ", ".join(f"{c.name} {mib(c.bytes)}" for c in comps)
    print(f"{name}: estimate {mib(total)} ({parts})")
    for label, env in (("glibc's default malloc", None), ("MALLOC_MMAP_THRESHOLD_=131072", FIXED_MMAP)):
        peak = child_peak([sys.executable, "-m", "py_trainer.server.cli", "train", "--config", str(config), "--runs-root",
                           str(work / f"runs-{key}-{len(label)}"), "--data-root", str(data_root or work)], work, env)
        print(f"  {label}: peak RSS {mib(peak)}, minus the import baseline {mib(baseline)}: {mib(peak - baseline)}; "
              f"estimate / (peak - baseline) = {total / (peak - baseline):.2f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("tiny", "qwen", "real"))
    args = ap.parse_args()
    from py_trainer.models.tiny_model import ensure_default_model

    tiny = Path(ensure_default_model())
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        work = Path(tmp)
        baseline = child_peak([sys.executable, "-c", IMPORTS], work)
        print(f"import baseline (torch, transformers, peft, trl, datasets, py_trainer): peak RSS {baseline / 2**20:.0f} MiB")
        if args.only in (None, "tiny"):
            measure("embedded model", "tiny", "", tiny, work, baseline)
        if args.only in (None, "qwen"):
            folder = qwen_shaped_model(work / "qwen25-05b-shaped")
            measure("Qwen2.5-0.5B-shaped (random init)", "qwen", "qwen25-05b-shaped", folder, work, baseline)
        if args.only in (None, "real"):
            from py_trainer.models.base_models import resolve_base_model

            measure("SmolLM2-135M-Instruct (the real recipe's request, 1 step)", "real", "smollm2-135m-instruct",
                    Path(resolve_base_model("smollm2-135m-instruct")), work, baseline, body=real_request(), data_root=REPO)
    return 0


if __name__ == "__main__":
    sys.exit(main())
