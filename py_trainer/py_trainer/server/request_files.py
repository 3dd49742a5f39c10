"""Request files (`py-trainer train --config`, `evaluate --config`, `data sample`): a request message
from YAML or JSON in proto field names, where every mistake is one line naming the file (and the
line/column or the field)."""

from __future__ import annotations

import json
from pathlib import Path

from google.protobuf import json_format

from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb



def _close(word: str, options) -> str:
    """ " (did you mean X?)" for the nearest option, or ""."""
    import difflib

    near = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean {near[0]}?)" if near else ""


def unknown_keys(obj: dict, descriptor, prefix: str = "") -> list[str]:
    """Every key of `obj` (recursively) that is no field of `descriptor`, as "a.b: unknown field
    (did you mean c?)". The suggestion keeps the user's spelling: snake_case (the proto names) for
    a snake_case key, the camelCase JSON name for a camelCase one."""
    out = []
    for key, value in obj.items():
        fd = descriptor.fields_by_name.get(key) or next(
            (f for f in descriptor.fields if f.json_name == key), None)
        where = f"{prefix}{key}"
        if fd is None:
            camel = any(c.isupper() for c in str(key)) and "_" not in str(key)
            names = [f.json_name if camel else f.name for f in descriptor.fields]
            out.append(f"{where}: unknown field{_close(str(key), names)}")
            continue
        if fd.message_type is None or fd.message_type.full_name.startswith("google.protobuf."):
            continue
        if fd.message_type.GetOptions().map_entry:
            continue
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if isinstance(item, dict):
                sub = f"{where}[{i}]." if isinstance(value, list) else f"{where}."
                out.extend(unknown_keys(item, fd.message_type, sub))
    return out


def load_request_file(path: Path, message):
    """A request message from YAML or JSON (proto field names, or their camelCase JSON names).

    Raises InvalidArgument("config", ...) whose message is one line naming the file: a missing
    file, a YAML/JSON syntax error with its line and column, an unknown key with the nearest
    field in the user's spelling, a value of the wrong type.
    """
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InvalidArgument("config", f"{path}: no such file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise InvalidArgument("config", f"{path}: cannot read: {err}") from None
    try:
        # JSON is YAML, but a lenient one (a trailing comma passes): a .json file is read as JSON
        obj = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as err:
        raise InvalidArgument("config", f"{path}:{err.lineno}:{err.colno}: not valid JSON: {err.msg}") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise InvalidArgument("config", f"{where}: not valid YAML/JSON: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise InvalidArgument("config", f"{path}: not valid YAML/JSON: {' '.join(str(err).split())}") from None
    if not isinstance(obj, dict):
        raise InvalidArgument("config", f"{path}: expected a mapping at the top level")
    unknown = unknown_keys(obj, message.DESCRIPTOR)
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise InvalidArgument("config", f"{path}: {unknown[0]}{more}")
    try:
        return json_format.ParseDict(obj, message)
    except json_format.ParseError as err:
        raise InvalidArgument("config", f"{path}: {parse_error_text(str(err))}") from None


def parse_error_text(message: str) -> str:
    """protobuf's "Failed to parse grpo field: Failed to parse max_steps field: invalid literal ..."
    as "grpo.max_steps: invalid literal ...", on one line."""
    import re

    message = " ".join(message.split())
    path = []
    while m := re.match(r"Failed to parse (\w+) field: ", message):
        path.append(m.group(1))
        message = message[m.end():]
    message = message.rstrip(".")
    if m := re.match(r"Invalid enum value (\S+) for enum type ([\w.]+)", message):
        message = enum_value_error(m.group(1), m.group(2))
    return f"{'.'.join(path)}: {message}" if path else message


def enum_value_error(value: str, enum_type: str) -> str:
    """"unknown value TOP_P_LADDER (did you mean SAMPLING_STRATEGY_TOP_P_LADDER?); valid: ..." for
    an enum field, naming every value but the UNSPECIFIED zero."""
    enum = pb.DESCRIPTOR.enum_types_by_name.get(enum_type.rsplit(".", 1)[-1])
    if enum is None:
        return f"unknown value {value} for {enum_type}"
    names = [v.name for v in enum.values if v.number != 0]
    near = [n for n in names if n.endswith("_" + value.upper())] or None
    hint = f" (did you mean {near[0]}?)" if near else _close(value, names)
    return f"unknown value {value}{hint}; valid: {', '.join(names)}"
