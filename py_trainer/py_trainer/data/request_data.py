"""Request data: JSONL files with line-numbered errors, task rows, ranked groups, and the splits.

Every mistake raises `InvalidArgument` naming the request field, and for a file the line:
``dataset.jsonl_path: tasks.jsonl line 3: not valid JSON (Expecting value at column 1)``. A dataset is
either inline rows/groups or a JSONL file under the data root (`paths.resolve_under`); a task file
is checked as the agent checks it (task_file.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from py_trainer.core.config import MAX_ROWS
from py_trainer.core.errors import InvalidArgument
from py_trainer.core.paths import resolve_under
from py_trainer.data.preference_data import GroupFormatError, check_group, group_from_json, proto_group_json
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
# Deeper JSON than MAX_JSON_DEPTH is refused by line: protobuf's own limit is 100 message levels,
# and a row's metadata becomes a Struct (3 levels per JSON level).
from py_trainer.data.task_file import (MAX_JSON_DEPTH, Task, TaskFileError, check_rows, json_depth, json_error, meta_path_for,
                                       parse_lines, read_meta)

# ---------------------------------------------------------------------------------------------
# JSONL and task rows


def read_jsonl(path: Path, field: str) -> list[dict]:
    """Parse a JSONL file; a bad line (not UTF-8, not JSON, nested past MAX_JSON_DEPTH, not an
    object) raises InvalidArgument naming the field, the file and the line number."""
    rows = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise InvalidArgument(field, f"{path.name} line {lineno}: not UTF-8 (byte 0x{raw[err.start]:02x} "
                                             f"at column {err.start + 1})") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise InvalidArgument(field, f"{path.name} line {lineno}: not valid JSON ({json_error(err)})") from None
            except RecursionError:
                raise InvalidArgument(field, f"{path.name} line {lineno}: nested too deeply "
                                             f"(at most {MAX_JSON_DEPTH} levels)") from None
            if json_depth(obj, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
                raise InvalidArgument(field, f"{path.name} line {lineno}: nested too deeply "
                                             f"(at most {MAX_JSON_DEPTH} levels)")
            if not isinstance(obj, dict):
                raise InvalidArgument(field, f"{path.name} line {lineno}: expected a JSON object")
            obj["_line"] = lineno
            rows.append(obj)
            if len(rows) > MAX_ROWS:
                raise InvalidArgument(field, f"{path.name} has more than {MAX_ROWS} rows")
    return rows


def task_rows(ds: pb.Dataset, data_root: Path, field: str, *, need_answers: bool) -> list[pb.TaskRow]:
    """The verifiable task rows a Dataset names, validated (ids unique, prompts non-empty)."""
    src = ds.WhichOneof("source")
    if src is None:
        raise InvalidArgument(field, "needs `inline` rows or a `jsonl_path`")
    rows: list[pb.TaskRow] = []
    if src == "inline":
        if ds.split:
            raise InvalidArgument(f"{field}.split", "only applies to jsonl_path datasets")
        for i, r in enumerate(ds.inline.rows):
            where = f"{field}.inline.rows[{i}]"
            check_row(r.prompt, list(r.answers), where, need_answers, line=None)
            rows.append(pb.TaskRow(id=r.id or f"row-{i}", prompt=r.prompt, answers=r.answers))
    else:
        path = resolve_under(data_root, ds.jsonl_path, f"{field}.jsonl_path")
        if not path.is_file():
            raise InvalidArgument(f"{field}.jsonl_path", f"{ds.jsonl_path!r} is not a file")
        for task in task_file_rows(path, f"{field}.jsonl_path"):
            if ds.split and task.split != ds.split:
                continue
            check_row(task.prompt, task.answers, f"{field}.jsonl_path", need_answers, line=(path.name, task.line))
            rows.append(pb.TaskRow(id=task.id, prompt=task.prompt, answers=task.answers))
    if ds.limit:
        rows = rows[: ds.limit]
    if not rows:
        raise InvalidArgument(field, "has no rows" + (f" in split {ds.split!r}" if ds.split else ""))
    seen: set[str] = set()
    for r in rows:
        if r.id in seen:
            raise InvalidArgument(field, f"duplicate row id {r.id!r}")
        seen.add(r.id)
    return rows


def task_file_rows(path: Path, field: str) -> list[Task]:
    """A task file's rows, checked as the agent checks them (task_file.py, docs/tasks.md): a
    mistake is InvalidArgument on `field` naming the file (or its metadata) and the line."""
    try:
        tasks = check_rows(parse_lines(path.read_bytes(), path.name), read_meta(meta_path_for(path)), path.name).tasks
    except TaskFileError as err:
        where = Path(err.where).name
        raise InvalidArgument(field, f"{where} line {err.line}: {err.message}" if err.line is not None
                              else f"{where}: {err.message}") from None
    if len(tasks) > MAX_ROWS:
        raise InvalidArgument(field, f"{path.name} has more than {MAX_ROWS} rows")
    return tasks


def check_row(prompt: str, answers: list[str], where: str, need_answers: bool, line) -> None:
    at = f"{line[0]} line {line[1]}: " if line else ""
    if not prompt.strip():
        raise InvalidArgument(where if line else f"{where}.prompt", f"{at}prompt is empty")
    if need_answers and not any(a.strip() for a in answers):
        raise InvalidArgument(where if line else f"{where}.answers", f"{at}needs at least one non-empty answer")


# ---------------------------------------------------------------------------------------------
# Ranked groups


def load_ranked_groups(ds: pb.Dataset, data_root: Path, field: str, *, need_ranks: bool = True) -> list[pb.RankedGroup]:
    """The ranked groups a Dataset names, validated; errors name the field (and file line).

    Inline groups: ``dataset.inline.groups[3].ranks: ...``; a JSONL file:
    ``dataset.jsonl_path: groups.jsonl line 4: ranks: [0, 0, 1] is not a permutation ...``.
    `split` keeps lines whose "split" equals it; `limit` keeps the first N after that.
    """
    src = ds.WhichOneof("source")
    if src is None:
        raise InvalidArgument(field, "needs `inline` groups or a `jsonl_path`")
    groups: list[pb.RankedGroup] = []
    if src == "inline":
        if ds.split:
            raise InvalidArgument(f"{field}.split", "only applies to jsonl_path datasets")
        if ds.inline.rows:
            raise InvalidArgument(f"{field}.inline.rows", "ranked-preference data goes in `groups`, not `rows`")
        for i, g in enumerate(ds.inline.groups):
            try:
                check_group(proto_group_json(g), need_ranks=need_ranks)
            except GroupFormatError as err:
                raise InvalidArgument(f"{field}.inline.groups[{i}]" + (f".{err.key}" if err.key else ""), err.message) from None
            groups.append(g)
    else:
        jfield = f"{field}.jsonl_path"
        path = resolve_under(data_root, ds.jsonl_path, jfield)
        if not path.is_file():
            raise InvalidArgument(jfield, f"{ds.jsonl_path!r} is not a file")
        for obj in read_jsonl(path, jfield):
            line = obj.pop("_line")
            if ds.split and obj.get("split") != ds.split:
                continue
            try:
                check_group(obj, need_ranks=need_ranks)
            except GroupFormatError as err:
                raise InvalidArgument(jfield, f"{path.name} line {line}: {err}") from None
            groups.append(group_from_json(obj))
    if ds.limit:
        groups = groups[: ds.limit]
    if not groups:
        raise InvalidArgument(field, "has no groups" + (f" in split {ds.split!r}" if ds.split else ""))
    return groups


# ---------------------------------------------------------------------------------------------
# Splits


def split_rows(req: pb.TrainRequest, data_root: Path, *, need_answers: bool = True) -> tuple[list[pb.TaskRow], list[pb.TaskRow]]:
    """(train rows, held-out rows) of a validated GRPO request: held_out.dataset's first
    num_prompts rows, or else the last num_prompts rows of the dataset (not trained on). Agent
    tasks need no answers (their TS scorers judge the episode)."""
    rows = task_rows(req.dataset, data_root, "dataset", need_answers=need_answers)
    n = req.held_out.num_prompts
    if req.held_out.HasField("dataset"):
        held = task_rows(req.held_out.dataset, data_root, "held_out.dataset", need_answers=need_answers)[:n]
        return rows, held
    return rows[:-n], rows[-n:]


def split_groups(req: pb.TrainRequest, data_root: Path) -> tuple[list[pb.RankedGroup], list[pb.RankedGroup]]:
    """(training groups, held-out groups) of a validated ranked-preference request."""
    groups = load_ranked_groups(req.dataset, data_root, "dataset", need_ranks=True)
    n = req.preference.num_held_out_groups
    if req.preference.HasField("held_out"):
        return groups, load_ranked_groups(req.preference.held_out, data_root, "preference.held_out")[:n]
    return groups[:-n], groups[-n:]
