"""The training process of one run: TRL GRPOTrainer + PEFT LoRA, rewards from `grpo.py`.

What it does, in order (all files atomically, in the run folder):
1. reads the effective request (``request.json``), splits train / held-out rows, writes exactly
   the rows it trains on to ``grpo_train.jsonl``;
2. loads the base model with `from_pretrained` (the embedded default model when base_model is
   empty) and measures the step-0 reward on the fixed held-out prompts, K samples each;
3. trains with `trl.GRPOTrainer(peft_config=LoraConfig(...))`: TRL does the optimisation; the
   reward functions it calls are the `grpo.py` ports, one per RewardSpec, weighted by TRL's
   `reward_weights` (its nansum equals `compose_rewards`). Every logged step becomes a
   `train_step` event with TRL's metric keys verbatim, plus warnings for curves to look at;
4. saves the adapter, measures the end reward on the same held-out prompts with the same
   sampling seed, and writes the curve, ``summary.json`` and the result.

Run as a process by the sidecar (``python -m py_trainer.worker --run-dir D --data-root R``): events
go to the Unix socket in $PY_TRAINER_EVENTS_SOCK; SIGUSR1 asks it to stop after the current
step (cancel), keeping a checkpoint; it dies with its parent (PR_SET_PDEATHSIG) and when the
events socket breaks, so a killed sidecar never leaves an orphan writing into a run folder.
`py-trainer train --config` calls `run_training` in-process with the same folder layout.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import logging
import math
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from google.protobuf import json_format

from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.reward_plugins import build_scorer
from py_trainer.runs import REQUEST_FILE, write_atomic, write_json_atomic

log = logging.getLogger(__name__)

Emit = Callable[[pb.RunEvent], None]

# Warning thresholds (see DESIGN.md's attribution table).
CLIPPED_RATIO_WARN = 0.9
ZERO_STD_WARN = 0.9
ZERO_STD_WARN_STEPS = 5
KL_SPIKE_FACTOR = 5.0
KL_SPIKE_MIN = 0.05
KL_SPIKE_EVERY = 10  # steps between two kl_spike warnings
BOOTSTRAP_RESAMPLES = 2000


class RewardFunctionError(RuntimeError):
    """A reward function raised: the run fails with its name and the offending sample."""


class RunStopped(Exception):
    """Cancelled before training started."""


# ---------------------------------------------------------------------------------------------
# Rewards as TRL reward functions


def guarded_scorer(name: str, scorer):
    """`scorer` that turns any exception into a RewardFunctionError naming the reward and sample."""

    def score(completion: str, answers: list[str]):
        try:
            return scorer(completion, answers)
        except Exception as exc:
            raise RewardFunctionError(f"reward {name!r} raised {type(exc).__name__}: {exc} on "
                                      f"completion={completion[:200]!r} answers={list(answers)!r}") from exc

    return score


def composed_guarded_scorer(specs: list[dict]):
    """The weighted sum of every spec (`grpo.compose_rewards`: TRL's nansum), each reward guarded."""
    from py_trainer import grpo

    return grpo.compose_rewards([grpo.WeightedScorer(score=guarded_scorer(s["name"], build_scorer(s)),
                                                     weight=s["weight"]) for s in specs])


def trl_reward_funcs(specs: list[dict]) -> list[Callable]:
    """One TRL reward function per spec, named after it (TRL logs ``rewards/<name>/mean``).

    TRL calls ``f(prompts=..., completions=..., completion_ids=..., answers=..., ...)`` with the
    dataset's columns; each completion is scored by the `grpo.py` port. A raising reward is not
    turned into 0: it fails the run, naming the reward and the sample.
    """
    funcs = []
    for spec in specs:
        scorer = guarded_scorer(spec["name"], build_scorer(spec))

        def reward(prompts, completions, answers, _scorer=scorer, **_):
            out = []
            for i, (c, a) in enumerate(zip(completions, answers)):
                try:
                    out.append(_scorer(c, list(a)))
                except RewardFunctionError as err:
                    raise RewardFunctionError(f"{err} (training batch sample {i})") from err
            return out

        reward.__name__ = spec["name"]
        funcs.append(reward)
    return funcs


# ---------------------------------------------------------------------------------------------
# Held-out reward


def bootstrap_mean_ci(values: list[float], seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """95% percentile bootstrap interval for the mean over prompts."""
    import numpy as np

    x = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    if len(x) < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    return (float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975)))


def relative_change_ci(start: list[float], end: list[float], seed: int,
                       resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float, float]:
    """(end - start)/|start| over paired prompts, with a 95% paired percentile bootstrap interval."""
    import numpy as np

    a = np.asarray(start, dtype=float)
    b = np.asarray(end, dtype=float)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    if len(a) == 0 or a.mean() == 0:
        return (math.nan, math.nan, math.nan)
    rel = float((b.mean() - a.mean()) / abs(a.mean()))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(resamples, len(a)))
    am, bm = a[idx].mean(axis=1), b[idx].mean(axis=1)
    ok = am != 0
    rels = (bm[ok] - am[ok]) / np.abs(am[ok])
    return (rel, float(np.quantile(rels, 0.025)), float(np.quantile(rels, 0.975)))


def held_out_reward(model, tokenizer, rows: list[pb.TaskRow], scorer, *, k: int, g: pb.GrpoConfig,
                    step: int, seed: int) -> pb.HeldOutReward:
    """Mean composed reward on the held-out prompts, K samples each, sampling as in training."""
    from py_trainer.generation import generate_completions, nanmean

    comps = generate_completions(model, tokenizer, [r.prompt for r in rows], k=k, temperature=g.temperature,
                                 top_p=g.top_p, max_new_tokens=g.max_completion_length, seed=seed,
                                 max_prompt_length=g.max_prompt_length)
    per_prompt = []
    for row, cs in zip(rows, comps):
        scores = []
        for j, c in enumerate(cs):
            try:
                scores.append(scorer(c, list(row.answers)))
            except RewardFunctionError as err:
                raise RewardFunctionError(f"{err} (held-out task {row.id}, sample {j}, step {step})") from err
        per_prompt.append(nanmean([math.nan if s is None else s for s in scores]))
    lo, hi = bootstrap_mean_ci(per_prompt, seed)
    return pb.HeldOutReward(step=step, mean=nanmean(per_prompt), ci_low=lo, ci_high=hi,
                            ci_method=f"percentile bootstrap over prompts ({BOOTSTRAP_RESAMPLES} resamples)",
                            num_prompts=len(rows), samples_per_prompt=k, per_prompt=per_prompt)


# ---------------------------------------------------------------------------------------------
# Warnings from the curve


class CurveWatch:
    """Turns logged metrics into RunWarning events, each code at most once per run phase."""

    def __init__(self, emit: Emit):
        self.emit = emit
        self.zero_std_run = 0
        self.kls: list[float] = []
        self.fired: set[str] = set()
        self.last_spike_step = -KL_SPIKE_EVERY

    def _warn(self, code: str, step: int, message: str) -> None:
        if code in self.fired:
            return
        self.fired.add(code)
        self.emit(pb.RunEvent(warning=pb.RunWarning(code=code, step=step, message=message)))

    def observe(self, step: int, m: dict[str, float]) -> None:
        clipped = m.get("completions/clipped_ratio")
        if clipped is not None and clipped >= CLIPPED_RATIO_WARN:
            self._warn("clipped_ratio_high", step,
                       f"completions/clipped_ratio = {clipped:.2f}: completions are truncated at max_completion_length; "
                       "rewards and lengths are unreliable (raise max_completion_length or check EOS)")
        zs = m.get("frac_reward_zero_std")
        self.zero_std_run = self.zero_std_run + 1 if zs is not None and zs >= ZERO_STD_WARN else 0
        if self.zero_std_run >= ZERO_STD_WARN_STEPS:
            self._warn("zero_std_plateau", step,
                       f"frac_reward_zero_std >= {ZERO_STD_WARN} for {self.zero_std_run} steps: most groups get identical "
                       "rewards, so advantages are 0 and nothing is learned (raise num_generations, add partial credit, "
                       "or use easier prompts)")
        kl = m.get("kl")
        if kl is not None and math.isfinite(kl):
            if len(self.kls) >= 3:
                med = sorted(self.kls)[len(self.kls) // 2]
                if (kl > KL_SPIKE_MIN and kl > KL_SPIKE_FACTOR * max(med, 1e-6)
                        and step - self.last_spike_step >= KL_SPIKE_EVERY):
                    self.fired.discard("kl_spike")  # spikes may repeat: report at most one per window
                    self.last_spike_step = step
                    self._warn("kl_spike", step, f"kl = {kl:.4g} is {kl / max(med, 1e-6):.1f}x the running median "
                               f"{med:.4g}: the policy jumped (lower learning_rate or epsilon, raise beta)")
            self.kls.append(kl)


# ---------------------------------------------------------------------------------------------
# The run


def _load_request(run_dir: Path) -> pb.TrainRequest:
    return json_format.Parse((run_dir / REQUEST_FILE).read_text(), pb.TrainRequest())


def split_rows(req: pb.TrainRequest, data_root: Path) -> tuple[list[pb.TaskRow], list[pb.TaskRow]]:
    """(train rows, held-out rows) exactly as validation described them."""
    from py_trainer.train_config import task_rows

    rows = task_rows(req.dataset, data_root, "dataset", need_answers=True)
    n = req.held_out.num_prompts
    if req.held_out.HasField("dataset"):
        held = task_rows(req.held_out.dataset, data_root, "held_out.dataset", need_answers=True)[:n]
        return rows, held
    return rows[:-n], rows[-n:]


def resolve_model_path(base_model: str, data_root: Path) -> str:
    from py_trainer.tiny_model import resolve_base_model

    if base_model and (data_root / base_model).exists():
        return str((data_root / base_model).resolve())
    return resolve_base_model(base_model)


def file_artifacts(run_dir: Path, rels: list[str]) -> list[pb.Artifact]:
    arts = []
    for rel in rels:
        p = run_dir / rel
        if p.is_dir():
            arts.extend(file_artifacts(run_dir, sorted(str(q.relative_to(run_dir)) for q in p.rglob("*") if q.is_file())))
        elif p.is_file():
            data = p.read_bytes()
            arts.append(pb.Artifact(path=rel, size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest()))
    return arts


def save_adapter_atomic(model, dest: Path) -> None:
    """save_pretrained into a temp folder, fsync, rename: adapter/ is never half-written."""
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".adapter."))
    try:
        model.save_pretrained(tmp)
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            os.replace(dest, old)
            shutil.rmtree(old)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def trainer_args(run_dir: Path, device, dtype, g: pb.GrpoConfig) -> dict:
    """TrainingArguments every mode shares: device/precision, schedule, seeds, logging, checkpoints."""
    import torch

    return dict(
        output_dir=str(run_dir / "checkpoints"),
        use_cpu=device.type == "cpu",
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        learning_rate=g.learning_rate,
        max_steps=g.max_steps,
        per_device_train_batch_size=g.per_device_train_batch_size,
        gradient_accumulation_steps=g.gradient_accumulation_steps,
        warmup_steps=g.warmup_ratio,  # transformers 5: a float in [0, 1) is a ratio of max_steps
        seed=g.seed,
        data_seed=g.seed,
        logging_steps=g.logging_steps,
        save_strategy="steps",
        save_steps=g.save_steps,
        save_total_limit=2,
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def run_event_callback(emit: Emit, should_stop: Callable[[], bool], on_log: Callable[[object, dict], None]):
    """The TrainerCallback every training mode uses: stop after the current step when cancelled
    (saving a checkpoint), report each saved checkpoint, and hand each log dict to `on_log(state, logs)`."""
    from transformers import TrainerCallback

    class RunEventCallback(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if should_stop():
                control.should_training_stop = True
                control.should_save = True

        def on_log(self, args, state, control, logs=None, **kw):
            if logs:
                on_log(state, logs)

        def on_save(self, args, state, control, **kw):
            emit(pb.RunEvent(checkpoint=pb.CheckpointSaved(
                step=state.global_step, path=f"checkpoints/checkpoint-{state.global_step}")))

    return RunEventCallback()


def train_run(run_dir: Path, data_root: Path, emit: Emit, should_stop: Callable[[], bool]) -> int:
    """Train one run in the mode its request names; return the proposed terminal RunState."""
    if _load_request(run_dir).mode == pb.TRAIN_MODE_RANKED_PREFERENCE:
        from py_trainer.preference import run_preference_training

        return run_preference_training(run_dir, data_root, emit, should_stop)
    return run_training(run_dir, data_root, emit, should_stop)


def run_training(run_dir: Path, data_root: Path, emit: Emit, should_stop: Callable[[], bool]) -> int:
    """Train one GRPO run; emit its events; return the proposed terminal RunState."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback, set_seed
    from trl import GRPOConfig, GRPOTrainer

    from py_trainer.curves import write_csv, write_plot
    from py_trainer.generation import pick_device, pick_dtype
    from py_trainer.train_config import reward_spec_dict

    t0 = time.time()
    req = _load_request(run_dir)
    g, lora, rt = req.grpo, req.lora, req.runtime
    train_rows, held_rows = split_rows(req, data_root)
    write_atomic(run_dir / "grpo_train.jsonl", "".join(
        json.dumps({"id": r.id, "prompt": r.prompt, "answers": list(r.answers)}) + "\n" for r in train_rows))

    device = pick_device(rt.device)
    dtype = pick_dtype(rt.precision, device)
    set_seed(g.seed)
    model_path = resolve_model_path(req.base_model, data_root)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype).to(device)
    total_params = sum(p.numel() for p in model.parameters())

    specs = [reward_spec_dict(s) for s in req.rewards]
    scorer = composed_guarded_scorer(specs)
    k = req.held_out.samples_per_prompt
    eval_seed = g.seed + 7919  # same sampling noise at step 0 and at the end
    if should_stop():
        raise RunStopped()
    start = held_out_reward(model, tokenizer, held_rows, scorer, k=k, g=g, step=0, seed=eval_seed)
    log.info("step-0 held-out reward %.4f on %d prompts x %d", start.mean, len(held_rows), k)

    steps: list[dict] = []
    watch = CurveWatch(emit)

    def on_log(state, logs: dict) -> None:
        if "reward" not in logs:  # skip the end-of-train summary log
            return
        metrics = {k2: float(v) for k2, v in logs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        metrics = {k2: v for k2, v in metrics.items() if math.isfinite(v) or k2 == "kl"}
        steps.append(dict(metrics, step=state.global_step))
        emit(pb.RunEvent(train_step=pb.TrainStep(step=state.global_step, max_steps=state.max_steps, metrics=metrics)))
        watch.observe(state.global_step, metrics)

    cfg = GRPOConfig(
        **trainer_args(run_dir, device, dtype, g),
        num_generations=g.num_generations,
        beta=g.beta,
        epsilon=g.epsilon,
        epsilon_high=g.epsilon_high,
        loss_type=g.loss_type,
        scale_rewards=g.scale_rewards,
        max_completion_length=g.max_completion_length,
        temperature=g.temperature,
        top_p=g.top_p,
        mask_truncated_completions=g.mask_truncated_completions,
        reward_weights=[s["weight"] for s in specs],
        gradient_checkpointing=rt.gradient_checkpointing,
    )
    dataset = Dataset.from_list([{"prompt": r.prompt, "answers": list(r.answers)} for r in train_rows])
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=trl_reward_funcs(specs),
        args=cfg,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                               target_modules=list(lora.target_modules) or "all-linear", task_type="CAUSAL_LM"),
        callbacks=[run_event_callback(emit, should_stop, on_log)],
    )
    trainer.remove_callback(PrinterCallback)  # events carry the metrics; keep worker.log readable
    trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    trainer.train()
    stopped = should_stop()
    done_steps = trainer.state.global_step

    save_adapter_atomic(trainer.model, run_dir / "adapter")
    result = pb.RunResult(start_reward=start, steps_completed=done_steps, total_params=total_params,
                          trainable_params=trainable)
    end = None
    if not stopped:
        end = held_out_reward(trainer.model, tokenizer, held_rows, scorer, k=k, g=g, step=done_steps,
                              seed=eval_seed)
        result.end_reward.CopyFrom(end)
        rel, lo, hi = relative_change_ci(list(start.per_prompt), list(end.per_prompt), g.seed)
        result.relative_change, result.relative_change_ci_low, result.relative_change_ci_high = rel, lo, hi
        log.info("end held-out reward %.4f (%+.1f%% vs step 0)", end.mean, rel * 100)
    write_csv(run_dir / "reward-vs-step.csv", steps)
    write_plot(run_dir / "reward-vs-step.png", steps, start_reward=start.mean,
               end_reward=end.mean if end else None,
               title=f"{run_dir.name}: GRPO reward vs step ({req.base_model or 'embedded default model'})")
    result.train_seconds = time.time() - t0
    summary = json_format.MessageToDict(result, preserving_proto_field_name=True)
    summary.update(run_id=run_dir.name, state="CANCELLED" if stopped else "SUCCEEDED",
                   base_model=model_path, train_rows=len(train_rows), held_out_rows=len(held_rows),
                   warnings=sorted(watch.fired))
    write_json_atomic(run_dir / "summary.json", summary)
    result.artifacts.extend(file_artifacts(run_dir, [
        "adapter", "grpo_train.jsonl", "reward-vs-step.csv", "reward-vs-step.png", "summary.json"]))
    emit(pb.RunEvent(result=result))
    return pb.RUN_STATE_CANCELLED if stopped else pb.RUN_STATE_SUCCEEDED


# ---------------------------------------------------------------------------------------------
# Process entry point


def failure_reason(exc: BaseException) -> str:
    """The FAILED reason: a reward error (however deeply TRL wrapped it) names reward and sample."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, RewardFunctionError):
        cause = cause.__cause__ or cause.__context__
    text = str(cause) if cause is not None else f"{type(exc).__name__}: {exc}"
    return text[:2000]


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class SocketEmitter:
    """Sends events as JSON lines; a broken socket means the sidecar is gone: exit at once."""

    def __init__(self, path: str | None):
        self.sock = None
        if path and int(os.environ.get("RANK", "0")) == 0:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(path)

    def __call__(self, ev: pb.RunEvent) -> None:
        if self.sock is None:
            return
        line = json_format.MessageToJson(ev, indent=None, preserving_proto_field_name=True) + "\n"
        try:
            self.sock.sendall(line.encode())
        except OSError:
            os._exit(3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="py_trainer.worker")
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--data-root", type=Path, required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _die_with_parent()
    stop = {"flag": False}
    signal.signal(signal.SIGUSR1, lambda *_: stop.__setitem__("flag", True))
    emit = SocketEmitter(os.environ.get("PY_TRAINER_EVENTS_SOCK"))
    try:
        state = train_run(args.run_dir, args.data_root, emit, lambda: stop["flag"])
    except RunStopped:
        emit(pb.RunEvent(state_change=pb.StateChange(state=pb.RUN_STATE_CANCELLED, reason="cancelled before training")))
        return 0
    except Exception as exc:
        log.exception("training failed")
        emit(pb.RunEvent(state_change=pb.StateChange(state=pb.RUN_STATE_FAILED, reason=failure_reason(exc))))
        return 1
    reason = "cancelled; stopped after the current step, checkpoint and adapter kept" \
        if state == pb.RUN_STATE_CANCELLED else ""
    emit(pb.RunEvent(state_change=pb.StateChange(state=state, reason=reason)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
