"""`py-trainer init-model | export`: the commands that write a model folder (the embedded model,
a PEFT adapter, or an adapter merged into its base)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from py_trainer.server.cli_args import UsageError, int_in


def _cmd_init_model(args: argparse.Namespace) -> int:
    from py_trainer.models import tiny_model

    if args.tasks is not None and not args.tasks.is_file():
        raise UsageError(f"py-trainer init-model: --tasks {args.tasks}: no such file")
    blocker = next((p for p in (args.out, *args.out.parents) if p.exists()), None) if args.out else None
    if blocker is not None and not blocker.is_dir():
        raise UsageError(f"py-trainer init-model: --out {args.out}: {blocker} is a file; give a folder to build into")
    try:
        if args.out:
            path = tiny_model.build_tiny_model(args.out, seed=args.seed, tasks_path=args.tasks)
        elif args.tasks is not None:
            path = tiny_model.ensure_embedded_model(args.tasks)
        else:
            path = tiny_model.ensure_default_model()
    except ValueError as err:  # a task file the build cannot use: file:line and the field
        raise UsageError(f"py-trainer init-model: {err}")
    print(path)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from py_trainer.server.standalone import export_adapter
    from py_trainer.workers.export_check import MergeMismatch

    try:
        what = export_adapter(args.adapter, args.out, merge=args.merge, base_model=args.base_model,
                              data_root=args.data_root, check_tasks=args.check_tasks, check_split=args.check_split,
                              check_n=args.check_prompts)
    except MergeMismatch as err:  # not a usage mistake: the merge itself is wrong, nothing was written
        print(f"py-trainer export: refused: {err.message}; nothing written to {args.out} "
              f"(the check: {args.out.parent / (args.out.name + '.export-check.json')})", file=sys.stderr)
        return 1
    print(f"wrote {what} to {args.out}")
    return 0


def add_init_model_command(sub) -> None:
    """`init-model`: build or find the embedded model."""
    p = sub.add_parser("init-model", help="build (or find cached) the embedded default model, or the embedded "
                                          "model of --tasks; prints its path")
    p.add_argument("--tasks", type=Path, help="task file (docs/tasks.md) to build from: the model a request names "
                                              "as base_model 'embedded:<tasks file>' (default: the AML task set)")
    p.add_argument("--out", type=Path, help="build into this folder instead of the cache")
    p.add_argument("--seed", type=int_in(0), default=0)
    p.set_defaults(func=_cmd_init_model)


def add_export_command(sub) -> None:
    """`export`: an adapter as a PEFT folder or merged; its examples are in its description."""
    p = sub.add_parser("export", help="write a run's adapter as a PEFT folder, or merged into its base model",
                       description="examples:\n  py-trainer export --adapter runs/r1/adapter --out r1-adapter\n"
                                   "  py-trainer export --adapter runs/r1/adapter --out r1-merged --merge",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--adapter", type=Path, required=True, help="a PEFT adapter folder (adapter_config.json + weights)")
    p.add_argument("--out", type=Path, required=True, help="folder to create (must not exist or be empty)")
    p.add_argument("--merge", action="store_true",
                   help="fold the LoRA weights into the base (peft merge_and_unload) and save the full model "
                        "and tokenizer: AutoModelForCausalLM.from_pretrained(OUT) loads it")
    p.add_argument("--base-model", default=None,
                   help="base model path or hub id ('' = the embedded default model; default: the adapter's "
                        "base_model_name_or_path)")
    p.add_argument("--data-root", type=Path, default=Path("."),
                   help="a relative --base-model or --check-tasks is under this folder")
    p.add_argument("--check-tasks", type=Path, default=None,
                   help="with --merge: task file (JSONL) whose prompts check the merged model against base + adapter "
                        "(default: the embedded model's agent-evals/tasks/aml_typology.jsonl)")
    p.add_argument("--check-split", default="test", help="with --merge: the split of --check-tasks to take (default test)")
    p.add_argument("--check-prompts", type=int, default=32,
                   help="with --merge: prompts checked: identical greedy completions and logits within the dtype's "
                        "tolerance, else refused naming the first differing prompt (default 32)")
    p.set_defaults(func=_cmd_export)
