"""`py-trainer`: serve | train | evaluate | defaults | init-model | plot | data | export

    py-trainer serve --host 127.0.0.1 --port 50151      # the gRPC sidecar
    py-trainer train --config run.yaml                   # one run, no server, same run folder
    py-trainer evaluate --config eval.yaml [--out F]     # base vs adapters on tasks, no server
    py-trainer defaults                                  # every knob: default, range, help
    py-trainer init-model [--tasks FILE]                 # build/cache the embedded (default) model
    py-trainer plot confusion IN.json OUT.png            # confusion matrices for the TS report
    py-trainer plot compare IN.json OUT.png              # agent compare's pairwise differences
    py-trainer data clean IN OUT                         # validate + clean ranked-group JSONL
    py-trainer data sample request.yaml OUT              # K responses per prompt, for annotators
    py-trainer data check-annotators --gold G B1 [B2..]  # gold checks + agreement of annotators
    py-trainer export --adapter DIR --out DIR [--merge]  # a PEFT folder, or a merged model

A user mistake (a missing or malformed file, an unknown key or flag, a bad value) is one line on
stderr naming the file and field, exit 2; a traceback means a bug.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import logging
import os
import signal
import sys
from pathlib import Path


class UsageError(Exception):
    """A command-line mistake: printed as one line, exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line ("py-trainer train: --config is required"), not usage + error."""

    def error(self, message: str):
        import re

        if m := re.match(r"argument \w+: invalid choice: '(.*?)' \(choose from (.*)\)$", message):
            choices = [c.strip(" '") for c in m.group(2).split(",")]
            near = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.5)
            hint = f" (did you mean {near[0]}?)" if near else f"; commands: {', '.join(choices)}"
            message = f"unknown command '{m.group(1)}'{hint}"
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def int_in(lo: int, hi: int | None = None):
    """An argparse type: an integer in [lo, hi] ("--port: must be in [0, 65535], got -3"), where
    plain int would take -3 (a port then wraps to 65533)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"must be in [{lo}, {hi}], got {value}" if hi is not None
                                             else f"must be >= {lo}, got {value}")
        return value

    parse.__name__ = "int"
    return parse


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


EXAMPLES = {
    "serve": ["py-trainer serve --port 50151 --runs-root runs --data-root .",
              "py-trainer serve --host 0.0.0.0 --token \"$PY_TRAINER_TOKEN\"   # another machine may call it",
              "py-trainer serve --slots 2                          # two runs train at once (CPU: threads split)",
              "py-trainer serve --executor ray --ray-address HEAD:6379 --runs-root /shared/runs   # workers on a Ray cluster"],
    "train": ["py-trainer train --config run.yaml", "py-trainer train --config run.yaml --run-id aml-v2 --runs-root runs",
              "py-trainer train --config run.yaml --run-id job-7 --machine-rank 1 --main-process-ip 10.0.0.7   "
              "# one node of a runtime.num_nodes run (docs/scale.md)"],
    "evaluate": ["py-trainer evaluate --config eval.yaml --out eval-result.json",
                 "  (eval.yaml: {tasks: {jsonl_path: tasks.jsonl, split: test}, adapters: [{name: a, run_id: r1, "
                 "checkpoint_step: 40}]})"],
    "defaults": ["py-trainer defaults | grep num_generations"],
    "init-model": ["py-trainer init-model", "py-trainer init-model --tasks my-tasks.jsonl"],
    "plot confusion": ["py-trainer plot confusion confusion.json confusion-matrix.png"],
    "plot compare": ["py-trainer plot compare compare.json compare.png"],
    "data clean": ["py-trainer data clean raw.jsonl clean.jsonl --report drops.json"],
    "data sample": ["py-trainer data sample sample.yaml to-rank.jsonl",
                    "  (sample.yaml: {prompts: [...], k: 4, strategy: SAMPLING_STRATEGY_TOP_P_LADDER})"],
    "data check-annotators": ["py-trainer data check-annotators --gold gold.jsonl alice.jsonl bob.jsonl"],
}
"""Each sub-command's help ends with these (`--help`); export keeps its own in its description."""


def _add_examples(parser: argparse.ArgumentParser, path: str = "") -> None:
    action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    for name, sub in (action.choices.items() if action is not None else ()):
        full = f"{path} {name}".strip()
        if full in EXAMPLES:
            sub.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[full])
            sub.formatter_class = argparse.RawDescriptionHelpFormatter
        _add_examples(sub, full)


def _add_roots(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs-root", type=Path, default=Path(os.environ.get("PY_TRAINER_RUNS_ROOT", "runs")),
                   help="folder holding one sub-folder per run (default: ./runs or $PY_TRAINER_RUNS_ROOT)")
    p.add_argument("--data-root", type=Path, default=Path(os.environ.get("PY_TRAINER_DATA_ROOT", ".")),
                   help="dataset, model and adapter paths in requests are relative to, and confined to, "
                        "this folder (default: . or $PY_TRAINER_DATA_ROOT)")


def _executor(args: argparse.Namespace):
    """The executor `serve` runs workers with: None = local child processes."""
    if args.executor == "local":
        return None
    from py_trainer.runs.ray_executor import RayExecutor, unreachable
    if not args.ray_address:
        raise UsageError("py-trainer serve: --executor ray needs --ray-address HOST:PORT (or $RAY_ADDRESS)")
    if why := unreachable(args.ray_address):
        raise UsageError(f"py-trainer serve: {why}")
    return RayExecutor(args.ray_address, cpus_per_rank=args.ray_cpus_per_rank)


def _cmd_serve(args: argparse.Namespace) -> int:
    from py_trainer.server.servicer import InsecureBindError, serve

    def ready(port: int) -> None:
        # Tests and scripts start with --port 0 and read the real port from this line.
        print(f"py-trainer listening on {args.host}:{port}", flush=True)

    try:
        asyncio.run(serve(args.host, args.port, args.runs_root, args.data_root,
                          token=args.token or os.environ.get("PY_TRAINER_TOKEN", ""),
                          tls_cert=args.tls_cert, tls_key=args.tls_key, max_queue=args.max_queue,
                          grace_s=args.grace, ready=ready, slots=args.slots, executor=_executor(args)))
    except InsecureBindError as err:
        print(f"py-trainer serve: {err}", file=sys.stderr)
        return 2
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from py_trainer.server.standalone import train_from_config

    return train_from_config(args.config, args.runs_root, args.data_root, run_id=args.run_id,
                             machine_rank=args.machine_rank, main_process_ip=args.main_process_ip,
                             main_process_port=args.main_process_port)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from py_trainer.server.standalone import evaluate_from_config

    return evaluate_from_config(args.config, args.out, args.runs_root, args.data_root)


def _cmd_defaults(args: argparse.Namespace) -> int:
    from py_trainer.core.config import describe_defaults

    print(describe_defaults())
    return 0


def _cmd_plot_confusion(args: argparse.Namespace) -> int:
    import json

    from py_trainer.plots.curves import write_confusion_plot

    try:
        spec = json.loads(args.input.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"py-trainer plot confusion: {args.input}: no such file")
    except json.JSONDecodeError as err:
        raise UsageError(f"py-trainer plot confusion: {args.input}:{err.lineno}:{err.colno}: {err.msg}")
    try:
        write_confusion_plot(args.output, spec)
    except ValueError as err:
        raise UsageError(f"py-trainer plot confusion: {args.input}: {err}")
    print(args.output)
    return 0


def _cmd_plot_compare(args: argparse.Namespace) -> int:
    import json

    from py_trainer.plots.compare_plot import write_compare_plot

    try:
        spec = json.loads(args.input.read_text(encoding="utf-8"))
        write_compare_plot(args.output, spec)
    except FileNotFoundError:
        raise UsageError(f"py-trainer plot compare: {args.input}: no such file")
    except json.JSONDecodeError as err:
        raise UsageError(f"py-trainer plot compare: {args.input}:{err.lineno}:{err.colno}: {err.msg}")
    except (ValueError, AttributeError) as err:
        raise UsageError(f"py-trainer plot compare: {args.input}: {err}")
    print(args.output)
    return 0


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


def _cmd_data_clean(args: argparse.Namespace) -> int:
    from py_trainer.data.preference_data import clean_cli

    return clean_cli(args)


def _cmd_data_sample(args: argparse.Namespace) -> int:
    import time

    from py_trainer.core.atomic import write_jsonl_atomic
    from py_trainer.core.errors import RequestError, Terminated, term_as_ctrl_c
    from py_trainer.data.preference_data import group_to_json
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
    from py_trainer.workers.sampling import conversion_note, sample_groups, validate_sample_request

    from py_trainer.server.standalone import ProgressLine, clock, load_request_file

    try:
        req = load_request_file(args.request, pb.SampleGroupsRequest())
        req, adapter = validate_sample_request(req, args.data_root)
    except RequestError as err:
        print(f"py-trainer data sample: {err.message if err.field == 'config' else err}", file=sys.stderr)
        return 2
    # sample_groups_to_jsonl's steps, with a progress line per group (a log file sees one every 10 s)
    line, t0, groups = ProgressLine(every_steps=max(1, len(req.prompts) // 10)), time.monotonic(), []
    if note := conversion_note(req, Path(args.data_root)):
        line.say(f"warning [base_model_conversion]: {note}")  # a minute unsaid otherwise, as in evaluate
    for grp in sample_groups(req, args.data_root, adapter):
        groups.append(group_to_json(grp))
        line.update(f"sampled {len(groups)}/{len(req.prompts)} prompts x {req.k} responses, "
                    f"elapsed {clock(time.monotonic() - t0)}", force=len(groups) == len(req.prompts))
    line.end()
    write_jsonl_atomic(args.output, groups)
    print(f"wrote {len(groups)} groups (empty ranks, ready to rank) to {args.output}")
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


def _cmd_data_check_annotators(args: argparse.Namespace) -> int:
    """Each batch file is one annotator's ranked groups (named by its file stem)."""
    from py_trainer.core.errors import RequestError, Terminated, term_as_ctrl_c
    from py_trainer.data.annotation import annotator_agreement, check_annotator_batch, score_contradictions
    from py_trainer.data.request_data import load_ranked_groups
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

    def groups(path: Path, field: str, need_ranks: bool = True):
        path = path.resolve()
        return load_ranked_groups(pb.Dataset(jsonl_path=path.name), path.parent, field, need_ranks=need_ranks)

    try:
        gold = groups(args.gold, "--gold") if args.gold else []
        batches = {p.stem: groups(p, str(p), need_ranks=False) for p in args.batches}
    except RequestError as err:
        print(f"py-trainer data check-annotators: {err}", file=sys.stderr)
        return 2
    if len(batches) != len(args.batches):
        print("py-trainer data check-annotators: two batch files share a name", file=sys.stderr)
        return 2
    ok = True
    for name, batch in batches.items():
        if gold:
            report = check_annotator_batch(batch, gold)
            ok &= report.accepted
            print(f"{name}: " + "\n".join(report.lines()))
        for c in score_contradictions(batch):  # a ranking its own 1-5 scores both contradict
            print(f"{name}: {c.line()}")
    if len(batches) >= 2:
        try:
            agree = annotator_agreement(batches)
        except ValueError as err:
            print(f"agreement: {err}")
        else:
            print(f"agreement across {agree.raters} annotators (observed {agree.observed_agreement:.3f}, "
                  f"chance {agree.expected_agreement:.3f}):")
            for line in agree.lines():
                if not line.startswith(tuple(f"{n}: " for n in batches)):  # contradictions printed above
                    print(f"  {line}")
    elif not gold:
        print("py-trainer data check-annotators: give --gold and/or at least two batches", file=sys.stderr)
        return 2
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="py-trainer", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    p = sub.add_parser("serve", help="run the gRPC sidecar")
    p.add_argument("--host", default="127.0.0.1", help="bind address; non-loopback needs --token or TLS")
    p.add_argument("--port", type=int_in(0, 65535), default=50151, help="0 = pick a free port (printed on start)")
    _add_roots(p)
    p.add_argument("--token", default="", help="require 'authorization: Bearer TOKEN' (or $PY_TRAINER_TOKEN)")
    p.add_argument("--tls-cert", type=Path, help="PEM certificate chain for TLS")
    p.add_argument("--tls-key", type=Path, help="PEM private key for TLS")
    p.add_argument("--max-queue", type=int_in(0), default=8, help="runs that may wait for the device")
    p.add_argument("--grace", type=non_negative_float, default=5.0, help="seconds in-flight RPCs get on shutdown")
    p.add_argument("--slots", type=int_in(1), default=None,
                   help="runs that train at once; a run takes one slot per rank (default: one per visible GPU, "
                        "1 on CPU; with --executor ray: the cluster's GPUs, else its CPUs / --ray-cpus-per-rank)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="where run workers train: child processes here (local), or a Ray cluster (ray; "
                        "the runs root must be mounted at the same path on every node, docs/scale.md)")
    p.add_argument("--ray-address", default=os.environ.get("RAY_ADDRESS", ""),
                   help="the Ray cluster's head, HOST:PORT (default: $RAY_ADDRESS); --executor ray only")
    p.add_argument("--ray-cpus-per-rank", type=int_in(1), default=1,
                   help="CPUs each rank of a run takes on the cluster (its OMP_NUM_THREADS); --executor ray only")
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("train", help="run one training request from a YAML/JSON file, no server")
    p.add_argument("--config", type=Path, required=True, help="TrainRequest as YAML or JSON (proto field names)")
    p.add_argument("--run-id", default="", help="overrides run_id in the config")
    p.add_argument("--machine-rank", type=int_in(0), default=None,
                   help="runtime.num_nodes > 1: this node's machine rank (Slurm: $SLURM_NODEID); run once per node")
    p.add_argument("--main-process-ip", default="",
                   help="runtime.num_nodes > 1: machine rank 0's address (Slurm: the job's first host)")
    p.add_argument("--main-process-port", type=int_in(1, 65535), default=29500,
                   help="runtime.num_nodes > 1: the ranks' rendezvous port on machine rank 0 (default: 29500)")
    _add_roots(p)
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("evaluate", help="evaluate base vs adapters from an EvaluateRequest file, no server")
    p.add_argument("--config", type=Path, required=True, help="EvaluateRequest as YAML or JSON (proto field names)")
    p.add_argument("--out", type=Path, help="write the EvaluateResult as JSON here")
    _add_roots(p)
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("defaults", help="print every request knob with its default, range and help")
    p.set_defaults(func=_cmd_defaults)

    p = sub.add_parser("init-model", help="build (or find cached) the embedded default model, or the embedded "
                                          "model of --tasks; prints its path")
    p.add_argument("--tasks", type=Path, help="task file (docs/tasks.md) to build from: the model a request names "
                                              "as base_model 'embedded:<tasks file>' (default: the AML task set)")
    p.add_argument("--out", type=Path, help="build into this folder instead of the cache")
    p.add_argument("--seed", type=int_in(0), default=0)
    p.set_defaults(func=_cmd_init_model)

    p = sub.add_parser("plot", help="draw a figure for the TS report with matplotlib")
    psub = p.add_subparsers(dest="plot_command", required=True, parser_class=Parser)
    c = psub.add_parser("confusion", help="confusion matrices (gold label x answer) per variant, side by side")
    c.add_argument("input", type=Path, help='JSON: {"title", "gold": [...], "answers": [...], "variants": [{"name", "matrix"}]}')
    c.add_argument("output", type=Path, help="PNG to write (atomically)")
    c.set_defaults(func=_cmd_plot_confusion)
    c = psub.add_parser("compare", help="agent compare's pairwise differences with their decision intervals")
    c.add_argument("input", type=Path, help='JSON: {"title", "rows": [{"label", "estimate", "lower", "upper", "rejects"}]}')
    c.add_argument("output", type=Path, help="PNG to write (atomically)")
    c.set_defaults(func=_cmd_plot_compare)

    p = sub.add_parser("data", help="ranked-group data tools")
    dsub = p.add_subparsers(dest="data_command", required=True, parser_class=Parser)
    c = dsub.add_parser("clean", help="validate and clean a ranked-group JSONL file (never edits IN)")
    c.add_argument("input", type=Path)
    c.add_argument("output", type=Path)
    c.add_argument("--refusal-pattern", action="append", default=None,
                   help="regex marking a refusal/template response (repeatable; replaces the defaults)")
    c.add_argument("--report", type=Path, help="also write the drop report as JSON here")
    c.set_defaults(func=_cmd_data_clean)
    c = dsub.add_parser("sample", help="sample K responses per prompt into ranked-group JSONL for annotators")
    c.add_argument("request", type=Path, help="a SampleGroupsRequest as YAML/JSON (proto field names): prompts, k, "
                                              "strategy, top_p_ladder / prompt_suffixes / overgenerate_n + scorer, ...")
    c.add_argument("output", type=Path, help="ranked-group JSONL to write (atomically)")
    c.add_argument("--data-root", type=Path, default=Path("."), help="adapter paths are relative to this folder")
    c.set_defaults(func=_cmd_data_sample)
    c = dsub.add_parser("check-annotators", help="check annotator batches against gold groups and each other")
    c.add_argument("batches", type=Path, nargs="+", help="one ranked-group JSONL file per annotator")
    c.add_argument("--gold", type=Path, help="expert-ranked gold groups (ranked-group JSONL)")
    c.set_defaults(func=_cmd_data_check_annotators)

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
    _add_examples(parser)
    return parser


def unknown_flags_error(parser: argparse.ArgumentParser, argv: list[str], extras: list[str] = ()) -> str:
    """"py-trainer train: unknown flag --conifg (did you mean --config?)" for the first flag the
    chosen sub-command does not take (or the first of `extras`); "" when every flag is known."""
    chosen = parser
    for word in argv:  # walk down the sub-command names the user gave
        action = next((a for a in chosen._actions if isinstance(a, argparse._SubParsersAction)), None)
        if action is not None and word in action.choices:
            chosen = action.choices[word]
        elif action is not None and not word.startswith("-"):
            return ""  # an unknown command: the parser's own "unknown command 'trian' (did you mean train?)" says it
    flags = [o for a in chosen._actions for o in a.option_strings]
    unknown = [w for w in argv if w.startswith("--") and w.split("=", 1)[0] not in flags] or list(extras)
    if not unknown:
        return ""
    word = unknown[0].split("=", 1)[0]
    near = difflib.get_close_matches(word, [f for f in flags if f.startswith("--")], n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]}?)" if near else ""
    kind = "flag" if word.startswith("-") else "argument"
    return f"{chosen.prog}: unknown {kind} {word}{hint} (see {chosen.prog} --help)"


def main(argv: list[str] | None = None) -> int:
    from py_trainer.core.cpu_env import cpu_process_env, tune_malloc

    added = cpu_process_env(os.environ)
    os.environ.update(added)
    tune_malloc(added)
    from py_trainer.core.errors import RequestError, Terminated, term_as_ctrl_c

    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
        if extras:
            raise UsageError(unknown_flags_error(parser, argv, extras))
    except UsageError as err:  # a misspelt flag explains a "required" error better than the error does
        print(unknown_flags_error(parser, argv) or err, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command != "serve":  # the server stops on SIGTERM its own way
        signal.signal(signal.SIGTERM, term_as_ctrl_c)
    name = " ".join(w for w in (args.command, getattr(args, "data_command", None)) if w)
    try:
        return args.func(args)
    except KeyboardInterrupt as err:  # its cleanup ran on the way up: one line, 130 as for Ctrl-C
        print(f"py-trainer {name}: interrupted ({'SIGTERM' if isinstance(err, Terminated) else 'Ctrl-C'})",
              file=sys.stderr)
        return 130
    except UsageError as err:
        print(err, file=sys.stderr)
        return 2
    except RequestError as err:  # one line, not a traceback: 2 for the user's mistake, 1 for a failure
        from py_trainer.server.standalone import USER_MISTAKES

        print(f"py-trainer {name}: {err.message if err.field in ('config', '') else err}", file=sys.stderr)
        return 2 if err.code in USER_MISTAKES else 1


if __name__ == "__main__":
    sys.exit(main())
