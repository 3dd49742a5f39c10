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
   shared-prefix cache saves least there). Timed per repeat, interleaved (ours, lm-eval, plain
   generate, ours, ...), each arm of each repeat in its own fresh process (this script again, with
   --arm), which does its imports and one untimed warm-up on 8 tasks, then the timed run:
   everything a user waits for after imports (model load, task and dataset building, generation,
   grading). Each process gets the OpenMP settings its tool's user runs with (--arm-env natural,
   the default; OpenMP reads them once, when torch loads): Evaluate's the parent's environment
   plus what the py-trainer CLI adds to it before torch loads (core/cpu_env.py, cpu_process_env: GOMP_SPINCOUNT
   and the malloc settings, each unless set already), lm-eval's and plain generate's the parent's
   environment without OMP_WAIT_POLICY, GOMP_SPINCOUNT and malloc settings (libgomp's and glibc's
   defaults); --arm-env same
   gives all three the parent's environment unchanged. A printed line names them. Printed:
   tasks/s for both (a task counts once per variant), their ratio, the generation-only ratio
   (time inside `generate_completions` or `generate_greedy_variants` vs inside
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
import subprocess
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


ARMS = {"evaluate": "Evaluate", "lm-eval": "lm-eval", "plain": "plain generate"}
"""The timed arms of the lm-eval comparison (--arm), in the order each repeat runs them: their printed names."""


def arm_envs(mode: str) -> dict[str, dict[str, str]]:
    """The environment of each arm's process. natural: Evaluate's is this one plus what the
    py-trainer CLI's `main` adds before torch loads (core/cpu_env.py, cpu_process_env), lm-eval's and plain
    generate's this one without the OpenMP wait and malloc settings (libgomp's and glibc's
    defaults, as their users run);
    same: this one for all three."""
    parent = dict(os.environ)
    if mode == "same":
        return {arm: parent for arm in ARMS}
    from py_trainer.core.cpu_env import OPENMP_WAIT_VARS, cpu_process_env, is_malloc_var  # no torch

    theirs = {k: v for k, v in parent.items() if k not in OPENMP_WAIT_VARS and not is_malloc_var(k)}
    return {"evaluate": {**parent, **cpu_process_env(parent)}, "lm-eval": theirs, "plain": theirs}


def describe_env(env: dict[str, str]) -> str:
    """The OpenMP wait and malloc variables set in env, or which defaults apply."""
    from py_trainer.core.cpu_env import OPENMP_WAIT_VARS, is_malloc_var

    omp = ", ".join(f"{k}={env[k]}" for k in OPENMP_WAIT_VARS if k in env) or "libgomp defaults"
    malloc = ", ".join(f"{k}={v}" for k, v in sorted(env.items()) if is_malloc_var(k))
    return f"{omp}, {malloc or 'glibc malloc defaults'}"


def run_arm(arm: str, args, tmp: Path, out: Path, env: dict[str, str]) -> dict:
    """This script as a fresh process running one arm (or "prepare") with env; what it wrote to out."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--arm", arm, "--arm-dir", str(tmp), "--arm-out", str(out),
           "--model", args.model, "--threads", str(args.threads), "--max-new-tokens", str(args.max_new_tokens),
           "--batch-size", str(args.batch_size), "--tasks", str(args.tasks), "--repeats", str(args.repeats),
           "--adapter", str(Path(args.adapter).resolve()) if args.adapter else "", "--sizes"]
    sys.stdout.flush()
    subprocess.run(cmd, env=env, cwd=REPO, check=True)
    return json.loads(out.read_text())


def compare_lm_eval(inputs: dict, tmp: Path, args) -> None:
    ids = inputs["ids"]
    envs = arm_envs(args.arm_env)
    print(f"{len(ids)} test-split tasks x 2 variants (base + LoRA adapter), greedy, max_new_tokens "
          f"{args.max_new_tokens}, batch size {args.batch_size}, {inputs['device']} {inputs['dtype']}, torch threads "
          f"{inputs['torch_threads']}; lm-eval {inputs['lm_eval']}")
    groups: dict[str, list[str]] = {}
    for arm, name in ARMS.items():
        groups.setdefault(describe_env(envs[arm]), []).append(name)
    print(f"arm env (--arm-env {args.arm_env}; each arm of each repeat its own process): "
          + "; ".join(f"{', '.join(names[:-1]) + ' and ' if names[1:] else ''}{names[-1]}: {desc}"
                      for desc, names in groups.items()), flush=True)
    t_ours, t_lm, t_plain, g_ours, g_lm = [], [], [], [], []
    for i in range(args.repeats):
        r_ours, r_lm, r_plain = (run_arm(arm, args, tmp, tmp / f"{arm}-{i}.json", envs[arm]) for arm in ARMS)
        t_ours.append(r_ours["seconds"])
        g_ours.append(r_ours["generation"])
        t_lm.append(r_lm["seconds"])
        g_lm.append(r_lm["generation"])
        t_plain.append(r_plain["seconds"])
        print(f"repeat {i}: Evaluate {t_ours[-1]:.2f} s (generation {g_ours[-1]:.2f} s)   "
              f"lm-eval {t_lm[-1]:.2f} s (generate_until {g_lm[-1]:.2f} s)   plain generate {t_plain[-1]:.2f} s",
              flush=True)
    c_ours, c_lm, plain = r_ours["completions"], r_lm["completions"], r_plain["completions"]
    n = 2 * len(ids)
    a, b = statistics.median(t_ours), statistics.median(t_lm)
    ratios = sorted(lm / us for us, lm in zip(t_ours, t_lm))
    print(f"median of {args.repeats}: Evaluate {n / a:.1f} tasks/s, lm-eval {n / b:.1f} tasks/s, ratio {b / a:.2f}x "
          f"(per-repeat ratios {ratios[0]:.2f}-{ratios[-1]:.2f}x; target >= {BENCH.target}x)")
    print(f"generation only: {statistics.median(g_lm) / statistics.median(g_ours):.2f}x "
          f"({statistics.median(g_ours):.2f} s vs {statistics.median(g_lm):.2f} s)")
    tokens = r_plain["tokens"]
    c = statistics.median(t_plain)
    print(f"completion tokens/s ({tokens} tokens of the reference's completions, end to end): Evaluate "
          f"{tokens / a:.1f}, lm-eval {tokens / b:.1f}, plain generate {tokens / c:.1f}; Evaluate / plain generate "
          f"{c / a:.2f}x (target >= 0.5x); Evaluate / lm-eval {b / a:.2f}x")
    for variant in ("base", "adapter"):
        same = sum(c_ours[variant][i] == c_lm[variant].get(i) for i in ids)
        ref = sum(c_ours[variant][i] == plain[variant][i] for i in ids)
        ref_lm = sum(c_lm[variant].get(i) == plain[variant][i] for i in ids)
        print(f"identical completions, {variant}: Evaluate = lm-eval {same}/{len(ids)}, Evaluate = plain generate "
              f"{ref}/{len(ids)}, lm-eval = plain generate {ref_lm}/{len(ids)}")
    differ = sum(plain["base"][i] != plain["adapter"][i] for i in ids)
    print(f"adapter completions that differ from the base's (plain generate): {differ}/{len(ids)}")


# ---------------------------------------------------------------------------------------------
# The child processes (--arm): "prepare" (once, before the comparisons) and one per timed arm


def prepare(args, tmp: Path) -> dict:
    """The model folder and adapter (tmp/adapter), and for the lm-eval comparison tmp/test.jsonl and
    what the arms share: task ids, formatted prompts, device and dtype. In a child, so that the
    parent never runs torch (its OpenMP threads could spin beside the timed arms)."""
    if args.model == "real":
        from py_trainer.models.base_models import resolve_base_model

        model_dir = resolve_base_model(BENCH.base_model)  # converted once, then cached
    else:
        from py_trainer.models.tiny_model import ensure_default_model

        model_dir = str(ensure_default_model())
    if args.adapter:
        import shutil

        adapter = Path(shutil.copytree(args.adapter, tmp / "adapter"))
    else:
        adapter = make_adapter(model_dir, tmp / "adapter")
    out = {"model_dir": model_dir, "adapter": str(adapter)}
    if args.repeats > 0:
        import torch
        from transformers import AutoTokenizer

        from py_trainer.models.loading import format_prompts, pick_device

        rows = [json.loads(line) for line in BENCH.tasks.read_text().splitlines()]
        test = [r for r in rows if r["split"] == "test"][:args.tasks or None]
        tok = AutoTokenizer.from_pretrained(model_dir)
        (tmp / "test.jsonl").write_text("".join(json.dumps({"id": r["id"], "split": "test", "prompt": r["prompt"],
                                                             "answers": r["answers"]}) + "\n" for r in test))
        device = str(pick_device("auto"))
        out.update(ids=[r["id"] for r in test], device=device, torch_threads=torch.get_num_threads(),
                   prompts=format_prompts(tok, [r["prompt"] for r in test], "chat" if BENCH.chat else "raw"),
                   dtype="bfloat16" if device == "cuda" else "float32",  # what Evaluate's runtime.precision "auto" picks
                   lm_eval=lm_eval_version())
    return out


def arm_evaluate(args, inputs: dict, tmp: Path) -> dict:
    from py_trainer.workers import evaluate as evaluate_module

    adapter, test_file = Path(inputs["adapter"]), tmp / "test.jsonl"
    ours(tmp, adapter, test_file, 8, args.max_new_tokens, args.batch_size)  # warm-up: imports, caches
    gen = [Clock(evaluate_module, "generate_completions"),
           Clock(evaluate_module, "generate_greedy_variants")]  # greedy variants in shared batches
    seconds, completions = ours(tmp, adapter, test_file, len(inputs["ids"]), args.max_new_tokens, args.batch_size)
    return {"seconds": seconds, "generation": sum(g.seconds for g in gen), "completions": completions}


def arm_lm_eval(args, inputs: dict, tmp: Path) -> dict:
    from lm_eval.models.huggingface import HFLM

    os.chdir(REPO)  # the task YAML's data_files path is relative to the repo root
    run = (inputs["model_dir"], Path(inputs["adapter"]), args.max_new_tokens, args.batch_size, inputs["device"],
           inputs["dtype"])
    lm_eval_run(*run, limit=8)  # warm-up
    gen = Clock(HFLM, "generate_until")
    seconds, completions = lm_eval_run(*run, limit=len(inputs["ids"]) if args.tasks else None)
    return {"seconds": seconds, "generation": gen.seconds, "completions": completions}


def arm_plain(args, inputs: dict, tmp: Path) -> dict:
    from transformers import AutoTokenizer

    model_dir, adapter, prompts = inputs["model_dir"], Path(inputs["adapter"]), inputs["prompts"]
    rest = (args.max_new_tokens, args.batch_size, inputs["device"], inputs["dtype"])
    plain_generate_run(model_dir, adapter, prompts[:8], *rest)  # warm-up
    seconds, texts = plain_generate_run(model_dir, adapter, prompts, *rest)
    completions = {variant: dict(zip(inputs["ids"], t)) for variant, t in zip(("base", "adapter"), texts)}
    tok = AutoTokenizer.from_pretrained(model_dir)  # after the clock: the tokens each completion's text encodes to
    tokens = sum(len(tok(c, add_special_tokens=False)["input_ids"]) for t in texts for c in t)
    return {"seconds": seconds, "completions": completions, "tokens": tokens}


def run_child(args) -> int:
    tmp = Path(args.arm_dir)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.arm == "prepare":
        result = prepare(args, tmp)
    else:
        inputs = json.loads((tmp / "inputs.json").read_text())
        result = {"evaluate": arm_evaluate, "lm-eval": arm_lm_eval, "plain": arm_plain}[args.arm](args, inputs, tmp)
    Path(args.arm_out).write_text(json.dumps(result))
    return 0


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
    ap.add_argument("--arm-env", choices=("natural", "same"), default="natural",
                    help="the environment of each arm's process in the lm-eval comparison. natural: Evaluate gets "
                    "this one plus what the py-trainer CLI sets before torch loads (core/cpu_env.py, cpu_process_env: "
                    "GOMP_SPINCOUNT, malloc settings, each unless already set), lm-eval and plain generate this one "
                    "without OMP_WAIT_POLICY and GOMP_SPINCOUNT (libgomp's defaults, as their users run); "
                    "same: this one, unchanged, for all three")
    ap.add_argument("--arm", choices=("prepare", *ARMS), default="",
                    help="internal: run one step of the lm-eval comparison in this process (the parent starts one "
                    "such process per arm and repeat) and write its result to --arm-out")
    ap.add_argument("--arm-dir", default="", help="internal: the parent's temp folder (--arm)")
    ap.add_argument("--arm-out", default="", help="internal: where the --arm process writes its JSON result")
    args = ap.parse_args()
    global BENCH
    BENCH = BENCHES[args.model]
    if args.model == "real" and args.sizes:
        ap.error("--model real runs the lm-eval comparison only: give --sizes with no value")
    if args.arm:
        return run_child(args)
    tmp = Path(tempfile.mkdtemp(prefix="bench-eval-"))
    inputs = run_arm("prepare", args, tmp, tmp / "inputs.json", dict(os.environ))
    model_dir, adapter = inputs["model_dir"], Path(inputs["adapter"])
    print(f"model {model_dir}; adapter {args.adapter or f'random LoRA r{BENCH.lora[0]}, B sd {BENCH.lora[1]} (make_adapter)'}")
    if args.repeats > 0:
        print("-- vs lm-evaluation-harness (same tasks, same model folder, same decoding)")
        compare_lm_eval(inputs, tmp, args)
    if args.sizes:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        rows = [json.loads(line) for line in BENCH.tasks.read_text().splitlines()]
        print("-- vs a naive loop (one prompt at a time, model reloaded per variant)")
        compare_naive(model_dir, adapter, tmp, rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
