"""`py-trainer data clean | sample | check-annotators`: the ranked-group data tools (clean a file,
sample responses for annotators, check annotators against gold and each other)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from py_trainer.server.cli_args import Parser


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

    from py_trainer.server.progress import ProgressLine, clock
    from py_trainer.server.request_files import load_request_file

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


def add_data_commands(sub) -> None:
    """`data` and its three sub-commands."""
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
