"""The run skeleton every training mode shares (GRPO in `train_grpo.py`, agent GRPO in
`train_agent.py`, ranked preference in `train_preference.py`, the warm start in `train_sft.py`), as TRL
shares one Trainer base between GRPOTrainer, DPOTrainer and SFTTrainer.

One run, in order (every file atomically, in the run folder):
1. read the effective request (``request.json``), seed everything, load the base model with
   `from_pretrained` (the embedded default model when base_model is empty);
2. `mode.prepare`: split the data and write exactly what will be trained on;
3. `mode.measure_start`: the step-0 held-out measurement, on the base model;
4. train with the mode's TRL trainer; our one `TrainerCallback` stops after the current step when
   cancelled (saving a checkpoint), marks and reports each checkpoint (`artifacts.write_checkpoint_marker`:
   every file's size and sha256), and hands each log to the mode. A resume from a checkpoint at
   max_steps trains nothing (`restore_checkpoint`: TRL would train one step past max_steps);
5. save the adapter, `mode.measure_end` on the same held-out set with the same sampling seed,
   the relative change with its paired bootstrap CI (`stats.relative_change_ci`), the mode's
   curves, ``summary.json``, and the result event with every artifact's size and sha256.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from google.protobuf import json_format

from py_trainer.core import stats
from py_trainer.core.atomic import write_json_atomic
from py_trainer.core.code_revision import code_revision
from py_trainer.core.config import LORA, SCHEDULE, trl_kwargs
from py_trainer.core.paths import resolve_under, run_data_paths
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.base_models import conversion_pending
from py_trainer.models.fused_head import compact_fused_head_on_cpu
from py_trainer.models.loading import count_params, load_model, resolve_prompt_format, save_adapter_atomic
from py_trainer.runs.artifacts import file_artifacts, latest_checkpoint, write_checkpoint_marker
from py_trainer.runs.events import EventLog
from py_trainer.runs.run_folder import load_request
from py_trainer.training.step_timer import StepTimer

log = logging.getLogger(__name__)

Emit = Callable[[pb.RunEvent], None]
BOOTSTRAP_RESAMPLES = 2000
TENSORBOARD_DIR = "tensorboard"  # transformers' TensorBoard event files, inside the run folder
EVAL_SEED_OFFSET = 7919  # held-out sampling seed = grpo.seed + this, the same at step 0 and at the end


class RunStopped(Exception):
    """Cancelled before training started."""


@dataclass
class RunContext:
    """What one run's mode sees: the request, the loaded model, and where events go."""

    run_dir: Path
    data_root: Path
    req: pb.TrainRequest
    emit: Emit
    should_stop: Callable[[], bool]
    model: Any
    tokenizer: Any
    model_path: str
    device: Any
    dtype: Any
    steps: list[dict] = field(default_factory=list)
    """One dict per logged step (metric keys verbatim, plus ``step``), for the curves."""
    trainer: Any = None
    rank: int = 0
    world: int = 1
    """This process's rank and the number of ranks (accelerate / torchrun); rank 0 alone writes."""
    resume_from: str = ""
    """The checkpoint folder a resumed run continues from ('' = a fresh run)."""
    prompt_format: str = "raw"
    """"raw" or "chat" (runtime.prompt_format with "auto" resolved against the tokenizer)."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def emit_step(self, step: int, max_steps: int, metrics: dict[str, float]) -> None:
        self.steps.append(dict(metrics, step=step))
        self.emit(pb.RunEvent(train_step=pb.TrainStep(step=step, max_steps=max_steps, metrics=metrics)))

    def warn(self, code: str, step: int, message: str) -> None:
        self.emit(pb.RunEvent(warning=pb.RunWarning(code=code, step=step, message=message)))


class TrainingMode(Protocol):
    """One training objective plugged into `run_training`."""

    artifacts: list[str]
    trl_skip: tuple[str, ...]
    """Schedule knobs (`config.SCHEDULE`) whose TRL name the mode's TRL config has no field for."""

    def prepare(self, run: RunContext) -> None: ...

    def measure_start(self, run: RunContext) -> Any: ...

    def on_log(self, run: RunContext, state, logs: dict) -> None: ...

    def build_trainer(self, run: RunContext, args: dict, callback) -> Any: ...

    def measure_end(self, run: RunContext, step: int) -> Any: ...

    def held_out(self, run: RunContext, measurement) -> pb.HeldOutReward: ...

    def finish(self, run: RunContext, result: pb.RunResult, start, end) -> dict: ...


# ---------------------------------------------------------------------------------------------
# Pieces both modes use


def trainer_args(run_dir: Path, device, dtype, g: pb.GrpoConfig, report_to=(), skip: tuple[str, ...] = ()) -> dict:
    """TrainingArguments every mode shares: the schedule knobs under their TRL names (config.py's
    `SCHEDULE` table, less `skip`), device/precision, checkpoints, and where transformers reports
    its own logs (`runtime.report_to`; "none" = nowhere)."""
    import torch

    return dict(
        trl_kwargs(g, SCHEDULE, skip=skip),
        output_dir=str(run_dir / "checkpoints"),
        use_cpu=device.type == "cpu",
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        save_strategy="steps",
        save_total_limit=g.save_total_limit or None,  # 0 = keep every checkpoint
        report_to=[r for r in report_to if r != "none"],
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def lora_config(lora: pb.LoraSettings):
    """PEFT's LoraConfig from the (effective) LoraSettings, through config.py's `LORA` table."""
    from peft import LoraConfig

    kwargs = trl_kwargs(lora, LORA)
    kwargs["target_modules"] = kwargs["target_modules"] or "all-linear"  # empty = every linear layer
    return LoraConfig(**kwargs, task_type="CAUSAL_LM")


def peft_config_for(run: RunContext):
    """The `peft_config` a mode hands its TRL trainer: None when the run started from an adapter
    (`run.model` is already that trainable PeftModel, its own LoRA config), else a fresh LoRA."""
    return None if run.req.HasField("init_adapter") else lora_config(run.req.lora)


def init_adapter_folder(req: pb.TrainRequest, run_dir: Path, data_root: Path) -> Path:
    """The PEFT folder the (validated) request's init_adapter names: a run's adapter/ or its
    checkpoint at checkpoint_step (runs sit beside this run), or a folder under the data root."""
    ref = req.init_adapter
    if ref.WhichOneof("source") == "path":
        return resolve_under(data_root, ref.path, "init_adapter.path")
    run = resolve_under(run_dir.parent, ref.run_id, "init_adapter.run_id")
    if ref.HasField("checkpoint_step"):
        return run / "checkpoints" / f"checkpoint-{ref.checkpoint_step}"
    return run / "adapter"


def run_seed(req: pb.TrainRequest) -> int:
    """The run's seed: sft.seed for the warm start, grpo.seed for every other mode."""
    return req.sft.seed if req.mode == pb.TRAIN_MODE_SFT else req.grpo.seed


def stop_on_every_rank(should_stop: Callable[[], bool]) -> bool:
    """should_stop() agreed by all ranks (any rank asked to stop -> all stop after this step), so a
    cancel never leaves one rank waiting in a collective for another that has left."""
    stop = bool(should_stop())
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        import torch

        flag = torch.tensor([1 if stop else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        stop = bool(flag.item())
    return stop


def close_process_group() -> bool:
    """Leave torch.distributed together and tidily; True when this process had a process group.

    Every rank calls it on its way out. First a barrier: the other ranks wait for rank 0 (which
    alone saves, measures and writes after the last step), so no rank tears its group down while
    a peer still holds the connections. Then the group is destroyed while the interpreter is fully
    alive: a rank that reaches interpreter exit with its gloo group open can die of SIGABRT
    ("terminate called without an active exception"; pytorch/pytorch#179291), which failed a
    2-rank run that had trained (seen in CI, rank 1, exit -6). The caller then leaves with
    os._exit (worker.main). If a peer died the barrier raises at once (gloo sees the socket close):
    the run's outcome is already decided, so teardown errors are logged, never raised."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return False
    try:
        if dist.get_world_size() > 1:
            dist.barrier()
    except Exception as err:
        log.warning("ranks did not meet at the end (a peer has gone): %s", err)
    try:
        dist.destroy_process_group()
    except Exception as err:
        log.warning("could not destroy the process group: %s", err)
    return True


def run_event_callback(emit: Emit, should_stop: Callable[[], bool], on_log: Callable[[object, dict], None],
                       rank: int = 0, world: int = 1):
    """The TrainerCallback every training mode uses: stop after the current step when cancelled
    (saving a checkpoint; all ranks agree), report each saved checkpoint, and hand each log dict
    to `on_log(state, logs)`. With several ranks, each logs its steps to its own log."""
    from transformers import TrainerCallback

    class RunEventCallback(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if world > 1:
                log.info("rank %d/%d finished step %d", rank, world, state.global_step)
            if stop_on_every_rank(should_stop):
                control.should_training_stop = True
                control.should_save = True

        def on_log(self, args, state, control, logs=None, **kw):
            if logs:
                on_log(state, logs)

        def on_save(self, args, state, control, **kw):
            # HF writes checkpoint-N in place and calls on_save once all of it is on disk: only
            # now does it count (artifacts.find_checkpoint ignores a folder without the marker and
            # skips one whose files no longer match the sizes and digests the marker lists).
            if state.is_world_process_zero:
                write_checkpoint_marker(Path(args.output_dir) / f"checkpoint-{state.global_step}", state.global_step)
            emit(pb.RunEvent(checkpoint=pb.CheckpointSaved(
                step=state.global_step, path=f"checkpoints/checkpoint-{state.global_step}")))

    return RunEventCallback()


def route_trainer_logs(trainer, tensorboard_dir: Path) -> None:
    """TensorBoard event files go to the run folder's tensorboard/ (not checkpoints/runs/<date>_<host>),
    and transformers' PrinterCallback (raw log dicts on stdout, added when tqdm is off) is dropped:
    our callback already turns every log into a train_step event and a progress line."""
    from transformers.integrations import TensorBoardCallback
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    for cb in trainer.callback_handler.callbacks:
        if isinstance(cb, TensorBoardCallback):
            cb.logging_dir = str(tensorboard_dir)


def numeric_metrics(logs: dict, keep_nan: tuple[str, ...] = ()) -> dict[str, float]:
    """The numeric entries of a TRL log dict; non-finite values dropped except for `keep_nan` keys."""
    import math

    out = {k: float(v) for k, v in logs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {k: v for k, v in out.items() if math.isfinite(v) or k in keep_nan}


def held_out_reward_proto(step: int, per_unit: list[float], *, seed: int, unit: str, metric: str,
                          samples_per_prompt: int) -> pb.HeldOutReward:
    """A held-out measurement as the contract's HeldOutReward: the mean over units (prompts or
    groups) with a percentile bootstrap CI over units (`stats.bootstrap_mean_ci`)."""
    ci = stats.bootstrap_mean_ci(per_unit, seed=seed % 2**32, resamples=BOOTSTRAP_RESAMPLES)
    method = f"percentile bootstrap over {unit} ({BOOTSTRAP_RESAMPLES} resamples)" + (f"; metric: {metric}" if metric else "")
    return pb.HeldOutReward(step=step, mean=stats.nan_mean(per_unit), ci_low=ci.lower, ci_high=ci.upper,
                            ci_method=method, num_prompts=len(per_unit), samples_per_prompt=samples_per_prompt,
                            per_prompt=per_unit)


# ---------------------------------------------------------------------------------------------
# The skeleton


def portable_base_name(base_model: str) -> str:
    """What an adapter names as its base: the hub id or data-root-relative path the user asked
    for, or the embedded default model's name; never a cache path of this machine."""
    if base_model:
        return base_model
    from py_trainer.models.tiny_model import default_model_dir

    return default_model_dir().name


def resume_point(run: RunContext) -> str:
    """The checkpoint a resumed run continues from, and the curve up to it (from the events log):
    steps logged after that checkpoint are trained again, so the curve stays continuous."""
    ckpt = latest_checkpoint(run.run_dir)
    if not ckpt:
        raise RuntimeError(f"cannot resume {run.run_dir.name}: no complete checkpoint")
    at = int(ckpt.rsplit("-", 1)[1])
    seen: dict[int, dict] = {}
    for ev in EventLog(run.run_dir, run.run_dir.name).events:
        if ev.WhichOneof("kind") == "train_step" and ev.train_step.step <= at:
            seen[ev.train_step.step] = dict(ev.train_step.metrics, step=ev.train_step.step)
    run.steps = [seen[k] for k in sorted(seen)]
    log.info("resuming %s from %s (%d logged steps kept)", run.run_dir.name, ckpt, len(run.steps))
    return ckpt


def resumed_at_the_end(run: RunContext) -> bool:
    """The checkpoint a resumed run continues from is at max_steps: nothing is left to train (the
    run died in its adapter save or end measurement). trainer.train(resume_from_checkpoint=...)
    would train one more step before it checks max_steps."""
    at = int(run.resume_from.rsplit("-", 1)[1])
    return 0 < run.trainer.args.max_steps <= at


def restore_checkpoint(trainer, ckpt: Path) -> None:
    """Put checkpoint `ckpt`'s adapter weights and trainer state (its global_step, log history)
    into `trainer` without training: what train(resume_from_checkpoint=...) restores, less the step."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import TrainerState

    set_peft_model_state_dict(trainer.model, load_file(str(ckpt / "adapter_model.safetensors")))
    trainer.state = TrainerState.load_from_json(str(ckpt / "trainer_state.json"))
    log.info("resumed at %s: the checkpoint is at max_steps, no step left to train", ckpt.name)


def run_training(run_dir: Path, data_root: Path, emit: Emit, should_stop: Callable[[], bool],
                 mode: TrainingMode, *, resume: bool = False) -> int:
    """Train one run with `mode`; emit its events; return the proposed terminal RunState
    (SUCCEEDED, or CANCELLED when should_stop() turned true). Raises on failure. `resume`: continue
    from the run's last complete checkpoint (optimizer, scheduler, RNG state) as the same run."""
    from transformers import set_seed

    t0 = time.time()
    phases: dict[str, float] = {}  # run phases outside the training loop, seconds (time_breakdown.run_seconds)
    lap = [time.perf_counter()]

    def done(phase: str) -> None:
        now = time.perf_counter()
        phases[phase] = phases.get(phase, 0.0) + now - lap[0]
        lap[0] = now

    run_dir, data_root = Path(run_dir), Path(data_root)
    req = load_request(run_dir)
    set_seed(run_seed(req))
    if note := conversion_pending(req.base_model, data_root):
        log.warning("%s", note)
        emit(pb.RunEvent(warning=pb.RunWarning(code="base_model_conversion", step=0, message=note)))
    model, tokenizer, model_path, device, dtype = load_model(req.base_model, data_root, req.runtime)
    if req.HasField("init_adapter"):  # trained from that adapter's weights: no fresh LoRA
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(init_adapter_folder(req, run_dir, data_root)), is_trainable=True)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    run = RunContext(run_dir=run_dir, data_root=data_root, req=req, emit=emit, should_stop=should_stop,
                     model=model, tokenizer=tokenizer, model_path=model_path, device=device, dtype=dtype,
                     rank=rank, world=world, prompt_format=resolve_prompt_format(req.runtime.prompt_format, tokenizer))
    if resume:
        run.resume_from = resume_point(run)
    total_params = count_params(model)
    done("load")
    mode.prepare(run)
    if should_stop():
        raise RunStopped()
    # Held-out measurement is rank 0's alone (it involves no collective): the other ranks go ahead
    # and wait for it in the first gradient all-reduce.
    done("prepare")
    start = mode.measure_start(run) if run.is_main else None
    done("held_out_start")

    if device.type == "cpu":
        compact_fused_head_on_cpu()  # TRL's LM head would score every prompt position too (fused_head.py)
    callback = run_event_callback(emit, should_stop, lambda state, logs: mode.on_log(run, state, logs), rank, world)
    args = trainer_args(run_dir, device, dtype, req.grpo, req.runtime.report_to, skip=mode.trl_skip)
    run.trainer = mode.build_trainer(run, args, callback)
    route_trainer_logs(run.trainer, run_dir / TENSORBOARD_DIR)
    trainable = count_params(run.trainer.model, trainable_only=True)
    timer = StepTimer()
    timer.attach(run.trainer)
    done("build_trainer")
    if run.resume_from and resumed_at_the_end(run):
        restore_checkpoint(run.trainer, run_dir / run.resume_from)
    else:
        run.trainer.train(resume_from_checkpoint=str(run_dir / run.resume_from) if run.resume_from else None)
    stopped = stop_on_every_rank(should_stop)
    done_steps = run.trainer.state.global_step
    done("train")
    if not run.is_main:
        log.info("rank %d/%d done at step %d", rank, world, done_steps)
        return pb.RUN_STATE_CANCELLED if stopped else pb.RUN_STATE_SUCCEEDED

    if "ref" in getattr(run.trainer.model, "peft_config", {}):
        # TRL's frozen copy of an init_adapter, GRPO's KL reference: not part of the run's adapter
        run.trainer.model.delete_adapter("ref")
    save_adapter_atomic(run.trainer.model, run_dir / "adapter", base_name=portable_base_name(req.base_model))
    done("save_adapter")
    result = pb.RunResult(start_reward=mode.held_out(run, start), steps_completed=done_steps,
                          total_params=total_params, trainable_params=trainable)
    end = None
    if not stopped:
        end = mode.measure_end(run, done_steps)
        done("held_out_end")
        result.end_reward.CopyFrom(mode.held_out(run, end))
        rc = stats.relative_change_ci(list(result.start_reward.per_prompt), list(result.end_reward.per_prompt),
                                      seed=run_seed(req), resamples=BOOTSTRAP_RESAMPLES)
        result.relative_change, result.relative_change_ci_low, result.relative_change_ci_high = \
            rc.estimate, rc.lower, rc.upper
    extras = mode.finish(run, result, start, end)
    done("finish")
    result.train_seconds = time.time() - t0
    state = pb.RUN_STATE_CANCELLED if stopped else pb.RUN_STATE_SUCCEEDED
    summary = json_format.MessageToDict(result, preserving_proto_field_name=True)
    summary.update(run_id=run_dir.name, state=pb.RunState.Name(state).removeprefix("RUN_STATE_"),
                   base_model=portable_base_name(req.base_model), base_model_path=model_path,
                   resumed_from=run.resume_from or None, world_size=world, prompt_format=run.prompt_format,
                   time_breakdown=timer.summary(phases), code_revision=code_revision(),
                   **run_data_paths(data_root, req), **extras)
    write_json_atomic(run_dir / "summary.json", summary)
    result.artifacts.extend(file_artifacts(run_dir, mode.artifacts + [TENSORBOARD_DIR, "summary.json"]))
    emit(pb.RunEvent(result=result))
    return state
