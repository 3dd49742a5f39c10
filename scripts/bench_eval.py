"""Evaluate side by side with what a user would run instead, in one run, on the same model folder.

1. lm-evaluation-harness (the bench extra: `pip install -e 'py_trainer[bench]'`), its HF backend
   (`HFLM`, `generate_until`) on our task YAML (scripts/lm_eval_tasks/aml_typology.yaml) over
   the test split of agent-evals/tasks/aml_typology.jsonl, vs `py_trainer.workers.evaluate`'s
   `run_evaluation` (the code behind the Evaluate RPC) on the same rows. Both: base model + one
   LoRA adapter, greedy, the same max_new_tokens and batch size, fp32 on CPU (bf16 on CUDA), the
   embedded default model loaded offline from its folder. lm-eval evaluates one model per call,
   so the adapter is a second `HFLM(peft=...)` call; Evaluate loads the base once and switches
   the adapter. The adapter: --adapter DIR (a trained one, e.g. the demo run's
   agent-evals/runs/<run_id>/adapter: answer-shaped completions, as Evaluate really sees), else a
   random LoRA (varied completions, a third of them running to max_new_tokens: decode-heavy, the
   shared-prefix cache saves least there). Timed per repeat, interleaved (ours, lm-eval, ours, ...), after one untimed
   warm-up of each: everything a user waits for after imports (model load, task and dataset
   building, generation, grading). Printed: tasks/s for both (a task counts once per variant),
   their ratio, the generation-only ratio (time inside `generate_completions` or
   `generate_greedy_variants` vs inside
   `HFLM.generate_until`), and the share of completions that are identical, per variant.
   Target: >= 1.5x lm-eval's tasks/s with identical completions.
   Beside them, the reference arm (issue 43): plain batched HF `generate` with its KV cache, the
   same formatted prompts, model folder and adapter, greedy, batches of --batch-size in task order,
   loaded once per variant like lm-eval; what a careful user would write in ten lines. Printed
   for all three: completion tokens/s (the tokens of each completion as the tokenizer encodes
   its text, over the arm's end-to-end seconds), and identical completions against the reference.
2. a naive loop at N = --sizes: one prompt at a time, model (and adapter) reloaded per variant,
   vs the same `run_evaluation`. Target: at least 5x.

    .venv/bin/python scripts/bench_eval.py                          # both, as `make bench`
    .venv/bin/python scripts/bench_eval.py --sizes --repeats 5      # lm-eval comparison only

`--model real` runs comparison 1 on SmolLM2-135M-Instruct (base_model "smollm2-135m-instruct",
docs/real-model.md) over the test split of agent-evals/tasks/arithmetic_chat.jsonl: one user message
through the model's chat template on both sides (Evaluate's runtime.prompt_format "chat";
lm-eval's apply_chat_template), graded by final_number_match (scripts/lm_eval_tasks/
arithmetic_chat.yaml). Give it a trained adapter of that model (--adapter), else a random r16
LoRA on every linear layer is made for it (B ~ N(0, 0.03): about half the completions differ
from the base's); --tasks N takes the first N test tasks:

    .venv/bin/python scripts/bench_eval.py --model real --sizes --max-new-tokens 16 \
        --adapter agent-evals/real-model/runs/<run_id>/adapter
    .venv/bin/python scripts/bench_eval.py --model real --sizes --repeats 1 --tasks 64 --max-new-tokens 16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")  # lm-eval's, datasets' and transformers' progress bars
REPO = Path(__file__).resolve().parents[1]
LM_EVAL_TASKS = REPO / "scripts" / "lm_eval_tasks"


class Bench:
    """What one model's comparison runs on: its task file, the lm-eval task over its test split, the
    grader both sides use, and the prompt format both sides apply."""

    def __init__(self, base_model: str, tasks: str, lm_eval_task: str, grader: str, chat: bool, target: float,
                 lora: tuple[int, float]):
        self.base_model, self.tasks = base_model, REPO / "agent-evals" / "tasks" / tasks
        self.lm_eval_task, self.grader, self.chat, self.target = lm_eval_task, grader, chat, target
        self.lora = lora
        """(rank, sd of the B matrices) of the random LoRA made when no --adapter is given"""


BENCHES = {"embedded": Bench("", "aml_typology.jsonl", "aml_typology", "exact_match", chat=False, target=1.5,
                             lora=(8, 0.15)),
           "real": Bench("smollm2-135m-instruct", "arithmetic_chat.jsonl", "arithmetic_chat", "final_number_match",
                         chat=True, target=2.0, lora=(16, 0.03))}  # issue 27: >= 2x end to end on the real model
BENCH = BENCHES["embedded"]


def make_adapter(model_dir: str, out: Path) -> Path:
    """A LoRA adapter with random non-zero weights, large enough that switching it on changes the
    outputs: the embedded base model answers money_mule to every test prompt; with it about two
    thirds of the 264 completions differ from each other, answer-shaped, so 'identical' compares
    real text. On the real model (BENCH.lora) about half its completions differ from the base's."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                           LoraConfig(r=BENCH.lora[0], lora_alpha=2 * BENCH.lora[0], target_modules="all-linear",
                                      task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, BENCH.lora[1])
    model.save_pretrained(out)
    return out


class Clock:
    """Seconds spent inside one function, summed over its calls (it is replaced by a timed wrapper)."""

    def __init__(self, owner, name: str):
        self.seconds = 0.0
        fn = getattr(owner, name)

        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.seconds += time.perf_counter() - t

        setattr(owner, name, timed)


# ---------------------------------------------------------------------------------------------
# The three ways to evaluate


def naive(model_dir: str, adapter: Path, rows: list[dict], max_new_tokens: int) -> float:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from py_trainer.core.rewards import build_scorer

    score = build_scorer({"name": "exact_match"})
    t0 = time.perf_counter()
    for variant in ("base", "adapter"):
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        if variant == "adapter":
            model = PeftModel.from_pretrained(model, str(adapter))
        model.eval()
        for r in rows:
            enc = tok(r["prompt"], return_tensors="pt", add_special_tokens=False)
            with torch.no_grad():
                out = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens,
                                     pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
            text = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            score(text, r["answers"])
    return time.perf_counter() - t0


def ours(data_root: Path, adapter: Path, rows_file: Path, n: int, max_new_tokens: int,
         batch_size: int) -> tuple[float, dict[str, dict[str, str]]]:
    """Evaluate's code path on the first n rows of rows_file: (seconds, {variant: {task id: completion}})."""
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
    from py_trainer.workers.evaluate import plan_evaluation, run_evaluation

    class Registry:  # what plan_evaluation needs: a data root; adapters are paths, not run ids
        def __init__(self, root):
            self.data_root = root

        def get(self, run_id):
            return None

    req = pb.EvaluateRequest(base_model=BENCH.base_model, tasks=pb.Dataset(jsonl_path=rows_file.name, limit=n),
                             adapters=[pb.AdapterRef(name="adapter", path=adapter.name)],
                             max_new_tokens=max_new_tokens, batch_size=batch_size, temperature=0.0,
                             graders=[pb.RewardSpec(name=BENCH.grader)],
                             runtime=pb.RuntimeSettings(prompt_format="chat" if BENCH.chat else "raw"))
    t0 = time.perf_counter()
    plan = plan_evaluation(req, Registry(data_root))
    result = run_evaluation(plan, data_root)
    seconds = time.perf_counter() - t0
    return seconds, {v.name: {t.task_id: t.samples[0].completion for t in v.tasks} for v in result.variants}


def lm_eval_run(model_dir: str, adapter: Path, max_new_tokens: int, batch_size: int, device: str,
                dtype: str, limit: int | None = None) -> tuple[float, dict[str, dict[str, str]]]:
    """lm-evaluation-harness on the bench's task (aml_typology, arithmetic_chat), base then adapter:
    (seconds, completions)."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    t0 = time.perf_counter()
    out: dict[str, dict[str, str]] = {}
    for variant, peft in (("base", None), ("adapter", str(adapter))):
        lm = HFLM(pretrained=model_dir, peft=peft, device=device, dtype=dtype, batch_size=batch_size)
        res = simple_evaluate(model=lm, tasks=[BENCH.lm_eval_task], num_fewshot=0, limit=limit, log_samples=True,
                              bootstrap_iters=0, gen_kwargs={"max_gen_toks": max_new_tokens},
                              apply_chat_template=BENCH.chat,
                              task_manager=TaskManager(include_path=str(LM_EVAL_TASKS), include_defaults=False))
        out[variant] = {s["doc"]["id"]: s["resps"][0][0] for s in res["samples"][BENCH.lm_eval_task]}
    return time.perf_counter() - t0, out


def plain_generate_run(model_dir: str, adapter: Path, prompts: list[str], max_new_tokens: int, batch_size: int,
                       device: str, dtype: str) -> tuple[float, list[dict[str, str]]]:
    """The reference arm: plain batched HF generate (KV cache, left padding, greedy) on the
    formatted prompts, batches in task order, model (+ adapter) loaded per variant:
    (seconds, [base completions, adapter completions])."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    out = []
    for peft in (None, adapter):
        tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
        tok.pad_token = tok.pad_token or tok.eos_token
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(device)
        if peft is not None:
            model = PeftModel.from_pretrained(model, str(peft))
        model.eval()
        texts = []
        for start in range(0, len(prompts), batch_size):
            enc = tok(prompts[start:start + batch_size], return_tensors="pt", padding=True,
                      add_special_tokens=False).to(device)
            with torch.no_grad():
                gen = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens,
                                     pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
            texts += tok.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        out.append(texts)
    return time.perf_counter() - t0, out


# ---------------------------------------------------------------------------------------------
# The comparisons


def compare_lm_eval(model_dir: str, adapter: Path, tmp: Path, rows: list[dict], args) -> None:
    import torch

    import lm_eval  # noqa: F401  (imported before any clock starts, as py_trainer is)
    from lm_eval.models.huggingface import HFLM

    from py_trainer.models.loading import pick_device
    from transformers import AutoTokenizer

    from py_trainer.models.loading import format_prompts
    from py_trainer.workers import evaluate as evaluate_module

    test = [r for r in rows if r["split"] == "test"][:args.tasks or None]
    tok = AutoTokenizer.from_pretrained(model_dir)
    prompts = format_prompts(tok, [r["prompt"] for r in test], "chat" if BENCH.chat else "raw")
    test_file = tmp / "test.jsonl"
    test_file.write_text("".join(json.dumps({"id": r["id"], "split": "test", "prompt": r["prompt"], "answers": r["answers"]})
                                 + "\n" for r in test))
    device = str(pick_device("auto"))
    dtype = "bfloat16" if device == "cuda" else "float32"  # what Evaluate's runtime.precision "auto" picks
    os.chdir(REPO)  # the task YAML's data_files path is relative to the repo root
    print(f"{len(test)} test-split tasks x 2 variants (base + LoRA adapter), greedy, max_new_tokens "
          f"{args.max_new_tokens}, batch size {args.batch_size}, {device} {dtype}, torch threads "
          f"{torch.get_num_threads()}; lm-eval {lm_eval_version()}")
    ours(tmp, adapter, test_file, 8, args.max_new_tokens, args.batch_size)  # warm-up: imports, caches
    lm_eval_run(model_dir, adapter, args.max_new_tokens, args.batch_size, device, dtype, limit=8)
    plain_generate_run(model_dir, adapter, prompts[:8], args.max_new_tokens, args.batch_size, device, dtype)
    gen_ours = Clock(evaluate_module, "generate_completions")
    gen_together = Clock(evaluate_module, "generate_greedy_variants")  # greedy variants in shared batches
    gen_lm = Clock(HFLM, "generate_until")
    t_ours, t_lm, t_plain, g_ours, g_lm = [], [], [], [], []
    limit = len(test) if args.tasks else None
    for i in range(args.repeats):
        g0 = gen_ours.seconds + gen_together.seconds
        t, c_ours = ours(tmp, adapter, test_file, len(test), args.max_new_tokens, args.batch_size)
        t_ours.append(t)
        g_ours.append(gen_ours.seconds + gen_together.seconds - g0)
        g0 = gen_lm.seconds
        t, c_lm = lm_eval_run(model_dir, adapter, args.max_new_tokens, args.batch_size, device, dtype, limit=limit)
        t_lm.append(t)
        g_lm.append(gen_lm.seconds - g0)
        t, c_plain = plain_generate_run(model_dir, adapter, prompts, args.max_new_tokens, args.batch_size, device,
                                        dtype)
        t_plain.append(t)
        print(f"repeat {i}: Evaluate {t_ours[-1]:.2f} s (generation {g_ours[-1]:.2f} s)   "
              f"lm-eval {t_lm[-1]:.2f} s (generate_until {g_lm[-1]:.2f} s)   plain generate {t_plain[-1]:.2f} s",
              flush=True)
    n = 2 * len(test)
    a, b = statistics.median(t_ours), statistics.median(t_lm)
    ratios = sorted(lm / us for us, lm in zip(t_ours, t_lm))
    print(f"median of {args.repeats}: Evaluate {n / a:.1f} tasks/s, lm-eval {n / b:.1f} tasks/s, ratio {b / a:.2f}x "
          f"(per-repeat ratios {ratios[0]:.2f}-{ratios[-1]:.2f}x; target >= {BENCH.target}x)")
    print(f"generation only: {statistics.median(g_lm) / statistics.median(g_ours):.2f}x "
          f"({statistics.median(g_ours):.2f} s vs {statistics.median(g_lm):.2f} s)")
    plain = {"base": dict(zip([r["id"] for r in test], c_plain[0])),
             "adapter": dict(zip([r["id"] for r in test], c_plain[1]))}
    tokens = sum(len(tok(c, add_special_tokens=False)["input_ids"]) for v in plain.values() for c in v.values())
    c = statistics.median(t_plain)
    print(f"completion tokens/s ({tokens} tokens of the reference's completions, end to end): Evaluate "
          f"{tokens / a:.1f}, lm-eval {tokens / b:.1f}, plain generate {tokens / c:.1f}; Evaluate / plain generate "
          f"{c / a:.2f}x (target >= 0.5x); Evaluate / lm-eval {b / a:.2f}x")
    for variant in ("base", "adapter"):
        same = sum(c_ours[variant][r["id"]] == c_lm[variant].get(r["id"]) for r in test)
        ref = sum(c_ours[variant][r["id"]] == plain[variant][r["id"]] for r in test)
        ref_lm = sum(c_lm[variant].get(r["id"]) == plain[variant][r["id"]] for r in test)
        print(f"identical completions, {variant}: Evaluate = lm-eval {same}/{len(test)}, Evaluate = plain generate "
              f"{ref}/{len(test)}, lm-eval = plain generate {ref_lm}/{len(test)}")
    differ = sum(plain["base"][r["id"]] != plain["adapter"][r["id"]] for r in test)
    print(f"adapter completions that differ from the base's (plain generate): {differ}/{len(test)}")


def lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


def compare_naive(model_dir: str, adapter: Path, tmp: Path, rows: list[dict], args) -> None:
    rows_file = tmp / "tasks.jsonl"
    rows_file.write_text("".join(json.dumps({"id": r["id"], "split": r["split"], "prompt": r["prompt"], "answers": r["answers"]}) + "\n"
                                 for r in rows))
    print(f"{'N':>5} {'naive tasks/s':>14} {'batched tasks/s':>16} {'ratio':>7}")
    for n in args.sizes:
        t_naive = naive(model_dir, adapter, rows[:n], args.max_new_tokens)
        t_batched, _ = ours(tmp, adapter, rows_file, n, args.max_new_tokens, args.batch_size)
        # tasks/s counts each task once per variant (2 variants).
        print(f"{n:>5} {2 * n / t_naive:>14.1f} {2 * n / t_batched:>16.1f} {t_naive / t_batched:>6.1f}x", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[50, 200, 800],
                    help="N for the naive-loop comparison (none: skip it)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of the lm-eval comparison (0: skip it)")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="Evaluate's default")
    ap.add_argument("--batch-size", type=int, default=64, help="Evaluate's default; lm-eval gets the same")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default, one per core)")
    ap.add_argument("--adapter", default="", help="a trained PEFT adapter folder of the model "
                    "(default: a random LoRA made here, see make_adapter)")
    ap.add_argument("--tasks", type=int, default=0, help="the first N test tasks of the lm-eval comparison (0: all)")
    ap.add_argument("--model", choices=sorted(BENCHES), default="embedded",
                    help="embedded: the default model on aml_typology; real: SmolLM2-135M-Instruct on arithmetic_chat")
    args = ap.parse_args()
    global BENCH
    BENCH = BENCHES[args.model]
    if args.model == "real" and args.sizes:
        ap.error("--model real runs the lm-eval comparison only: give --sizes with no value")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.model == "real":
        from py_trainer.models.base_models import resolve_base_model

        model_dir = resolve_base_model(BENCH.base_model)  # converted once, then cached
    else:
        from py_trainer.models.tiny_model import ensure_default_model

        model_dir = str(ensure_default_model())
    tmp = Path(tempfile.mkdtemp(prefix="bench-eval-"))
    if args.adapter:
        import shutil

        adapter = Path(shutil.copytree(args.adapter, tmp / "adapter"))
    else:
        adapter = make_adapter(model_dir, tmp / "adapter")
    rows = [json.loads(line) for line in BENCH.tasks.read_text().splitlines()]
    print(f"model {model_dir}; adapter {args.adapter or f'random LoRA r{BENCH.lora[0]}, B sd {BENCH.lora[1]} (make_adapter)'}")
    if args.repeats > 0:
        print("-- vs lm-evaluation-harness (same tasks, same model folder, same decoding)")
        compare_lm_eval(model_dir, adapter, tmp, rows, args)
    if args.sizes:
        print("-- vs a naive loop (one prompt at a time, model reloaded per variant)")
        compare_naive(model_dir, adapter, tmp, rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
