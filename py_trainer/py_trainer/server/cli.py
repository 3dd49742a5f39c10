"""`py-trainer`: serve | train | evaluate | defaults | init-model | plot | data | export | serve-policy

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
    py-trainer serve-policy --run ID --runs-root DIR     # a policy on an OpenAI-compatible endpoint

A user mistake (a missing or malformed file, an unknown key or flag, a bad value) is one line on
stderr naming the file and field, exit 2; a traceback means a bug.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import signal
import sys

from py_trainer.server.cli_args import Parser, UsageError
from py_trainer.server.cli_data import add_data_commands
from py_trainer.server.cli_models import add_export_command, add_init_model_command
from py_trainer.server.cli_plots import add_plot_commands
from py_trainer.server.cli_policy import add_serve_policy_command
from py_trainer.server.cli_runs import add_evaluate_command, add_serve_command, add_train_command

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


def _cmd_defaults(args: argparse.Namespace) -> int:
    from py_trainer.core.config import describe_defaults

    print(describe_defaults())
    return 0


def add_defaults_command(sub) -> None:
    """`defaults`: every request knob."""
    p = sub.add_parser("defaults", help="print every request knob with its default, range and help")
    p.set_defaults(func=_cmd_defaults)


def build_parser() -> argparse.ArgumentParser:
    """The `py-trainer` parser: each command group is added by its own module, in the order --help lists them."""
    parser = Parser(prog="py-trainer", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    add_serve_command(sub)
    add_train_command(sub)
    add_evaluate_command(sub)
    add_defaults_command(sub)
    add_init_model_command(sub)
    add_plot_commands(sub)
    add_data_commands(sub)
    add_export_command(sub)
    add_serve_policy_command(sub)
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
