"""The task format (docs/tasks.md): the same checks, in the same order and words, as the agent's
loader (ts_agent/src/agent/eval/tasks.ts `loadTaskFile`), so the sidecar and the agent accept
exactly the same task files. One table of bad files (tests/data/bad_task_files.json) is checked
against both loaders (tests/test_task_file.py, ts_agent/test/task-file-table.test.ts).

Each mistake is a `TaskFileError` whose `line` is the 1-based line (None for the file or its
metadata) and whose message names the field, e.g. ``field "answers" must start with the label "x"``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

SPLITS = ("train", "test", "test_heldout_template")
META_KEYS = ("label_field", "labels", "slice_field", "splits", "graders", "description", "generator")
# JSON.parse's limits that Python's json does not share, refused on both sides.
MAX_JSON_DEPTH = 32
# What JavaScript's String.prototype.trim() strips: a line of only these is blank on both sides.
JS_WHITESPACE = " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
                "\u2028\u2029\u202f\u205f\u3000\ufeff"


class TaskFileError(ValueError):
    """A bad task file: `where` is the file (or its metadata), `line` the 1-based line or None."""

    def __init__(self, where: str, line: int | None, message: str):
        self.where, self.line, self.message = where, line, message
        super().__init__(f"{where}:{line}: {message}" if line is not None else f"{where}: {message}")


@dataclass
class Task:
    id: str
    split: str
    prompt: str
    answers: list[str]
    line: int
    label: str | None = None


@dataclass
class TaskFile:
    tasks: list[Task] = field(default_factory=list)
    labels: list[str] | None = None


def js_string(v) -> str:
    """JSON.stringify of a parsed JSON value, as the agent prints it ("undefined" when absent)."""
    return "undefined" if v is _ABSENT else json.dumps(v, ensure_ascii=False, separators=(",", ":"))


_ABSENT = object()


def json_error(err: json.JSONDecodeError) -> str:
    """A JSONDecodeError's reason, whole: json's `msg` alone ends mid-sentence ("Invalid control
    character at"), so the column is added."""
    reason = err.msg[:-3] if err.msg.endswith(" at") else err.msg
    return f"{reason} at column {err.colno}"


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def parse_json_line(text: str):
    """json.loads as strict as JSON.parse: NaN / Infinity refused, nesting past MAX_JSON_DEPTH refused.
    Raises ValueError with the whole reason."""
    try:
        obj = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        raise ValueError(f"invalid JSON ({json_error(err)})") from None
    except RecursionError:
        raise ValueError(f"nested too deeply (at most {MAX_JSON_DEPTH} levels)") from None
    except ValueError as err:
        raise ValueError(f"invalid JSON ({err})") from None
    if json_depth(obj, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise ValueError(f"nested too deeply (at most {MAX_JSON_DEPTH} levels)")
    return obj


def json_depth(obj, limit: int) -> int:
    """Nesting depth of a parsed JSON value, counted without recursion; stops counting past `limit`."""
    depth, level = 0, [obj]
    while level and depth <= limit:
        depth += 1
        level = [v for o in level if isinstance(o, (dict, list)) for v in (o.values() if isinstance(o, dict) else o)
                 if isinstance(v, (dict, list))]
    return depth


def _non_empty_strings(v) -> bool:
    return isinstance(v, list) and len(v) > 0 and all(isinstance(x, str) and x != "" for x in v)


def meta_path_for(tasks_path: Path) -> Path:
    """<name>.meta.json beside <name>.jsonl (or beside <file> for another extension)."""
    s = str(tasks_path)
    return Path((s[: -len(".jsonl")] if s.endswith(".jsonl") else s) + ".meta.json")


def read_meta(path: Path) -> dict:
    """The task file's metadata ({} when there is none), checked as the agent checks it."""
    where = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise TaskFileError(where, None, f"cannot read the task metadata ({err.strerror})") from None
    try:
        obj = parse_json_line(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise TaskFileError(where, None, f"not UTF-8 (byte 0x{raw[err.start]:02x} at offset {err.start})") from None
    except ValueError as err:
        raise TaskFileError(where, None, str(err)) from None
    if not isinstance(obj, dict):
        raise TaskFileError(where, None, "the metadata must be a JSON object")
    for key in obj:
        if key not in META_KEYS:
            raise TaskFileError(where, None, f'unknown field "{key}" (known: {", ".join(META_KEYS)})')
    for key in ("label_field", "slice_field"):
        if key in obj and (not isinstance(obj[key], str) or obj[key] == ""):
            raise TaskFileError(where, None, f'field "{key}" must be a non-empty string')
    for key in ("labels", "splits", "graders"):  # graders: the agent's eval reads them (docs/tasks.md)
        if key in obj and not _non_empty_strings(obj[key]):
            raise TaskFileError(where, None, f'field "{key}" must be a non-empty array of non-empty strings')
        if key in obj and len(set(obj[key])) != len(obj[key]):
            raise TaskFileError(where, None, f'field "{key}" repeats a value')
    return obj


def _optional_string(obj: dict, name: str, where: str, line: int) -> str | None:
    if name not in obj:
        return None
    v = obj[name]
    if not isinstance(v, str) or v == "":
        raise TaskFileError(where, line, f'field "{name}" must be a non-empty string')
    return v


def _require_string(obj: dict, name: str, where: str, line: int) -> str:
    v = _optional_string(obj, name, where, line)
    if v is None:
        raise TaskFileError(where, line, f'field "{name}" is required (a non-empty string)')
    return v


def check_rows(lines: list[tuple[int, object]], meta: dict, where: str) -> TaskFile:
    """The checks of tasks.ts loadTaskFile over parsed lines (1-based line, parsed JSON value)."""
    label_field = meta.get("label_field", "label")
    slice_field = meta.get("slice_field", "slice")
    splits = meta.get("splits", list(SPLITS))
    declared = meta.get("labels")
    tasks: list[Task] = []
    ids: set[str] = set()
    has = {"label": [], "slice": [], "template": []}
    for line, obj in lines:
        if not isinstance(obj, dict):
            raise TaskFileError(where, line, "row must be a JSON object")
        tid = _require_string(obj, "id", where, line)
        if tid in ids:
            raise TaskFileError(where, line, f'field "id" duplicates {js_string(tid)}')
        ids.add(tid)
        split = obj.get("split", _ABSENT)
        if not isinstance(split, str) or split not in splits:
            raise TaskFileError(where, line, f'field "split" must be one of {", ".join(splits)}, got {js_string(split)}')
        prompt = _require_string(obj, "prompt", where, line)
        answers = obj.get("answers")
        if not _non_empty_strings(answers):
            raise TaskFileError(where, line, 'field "answers" must be a non-empty array of non-empty strings')
        label = _optional_string(obj, label_field, where, line)
        if declared and label is None:
            raise TaskFileError(where, line, f'field "{label_field}" is required: the metadata declares a label set')
        if label is not None and declared and label not in declared:
            raise TaskFileError(where, line, f'field "{label_field}" must be one of {", ".join(declared)}, got {js_string(label)}')
        if label is not None and answers[0] != label:
            raise TaskFileError(where, line, f'field "answers" must start with the {label_field} {js_string(label)}')
        slice_value = _optional_string(obj, slice_field, where, line)
        template = _optional_string(obj, "template", where, line)
        human = _optional_string(obj, "human_label", where, line)
        if human is not None and declared and human not in declared:
            raise TaskFileError(where, line, f'field "human_label" must be one of {", ".join(declared)}, got {js_string(human)}')
        tasks.append(Task(tid, split, prompt, list(answers), line, label))
        has["label"].append(label is not None)
        has["slice"].append(slice_value is not None)
        has["template"].append(template is not None)
    if not tasks:
        raise TaskFileError(where, None, "no tasks (the file is empty)")
    for key, name in (("label", label_field), ("slice", slice_field), ("template", "template")):
        flags = has[key]
        if any(flags) and not all(flags):
            line = tasks[flags.index(False)].line
            raise TaskFileError(where, line, f'field "{name}" is missing here but other rows have it '
                                             "(give it on every row or on none)")
    labelled = all(has["label"])
    labels = list(declared) if declared else sorted({t.label for t in tasks}) if labelled else None
    return TaskFile(tasks, labels)


def parse_lines(raw: bytes, where: str) -> list[tuple[int, object]]:
    """(line, parsed value) of every non-blank line; a line that is not UTF-8 or not JSON is a
    TaskFileError naming it."""
    out = []
    for i, chunk in enumerate(raw.split(b"\n"), start=1):
        try:
            text = chunk.decode("utf-8")
        except UnicodeDecodeError as err:
            raise TaskFileError(where, i, f"not UTF-8 (byte 0x{chunk[err.start]:02x} at column {err.start + 1})") from None
        if text.strip(JS_WHITESPACE) == "":
            continue
        try:
            out.append((i, parse_json_line(text)))
        except ValueError as err:
            raise TaskFileError(where, i, str(err)) from None
    return out


def load_task_file(path: Path) -> TaskFile:
    """Reads and checks a task file and its metadata; a mistake is a TaskFileError
    "<path>:<line>: <message>" naming the field (the agent's words)."""
    path = Path(path)
    meta = read_meta(meta_path_for(path))
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise TaskFileError(str(path), None, f"cannot read the task file ({err.strerror})") from None
    return check_rows(parse_lines(raw, str(path)), meta, str(path))


__all__ = ["SPLITS", "MAX_JSON_DEPTH", "Task", "TaskFile", "TaskFileError", "check_rows", "json_error",
           "load_task_file", "meta_path_for", "parse_json_line", "parse_lines", "read_meta"]
