"""What every task reward reads: the answer text of a completion (the port of answer-text.ts).

`normalize_answer` (case folding and punctuation from the checked-in char_classes.json, never this
runtime's unicodedata), `extract_answer` (the last <tag>...</tag>), the tag-name and whitespace rules,
and `RewardInputError`, which every reward raises on bad input. task_rewards.py re-exports the
public names; `make parity` holds them to the TS code."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path


class RewardInputError(ValueError):
    """Invalid input; ``kind`` is one of answer-text.ts's RewardErrorKind: empty, group_size, nan,
    out_of_range, bad_option, unknown_reward, unknown_param, param_type, param_value."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def fail(kind: str, message: str):
    raise RewardInputError(kind, message)


WHITESPACE_RUN = re.compile(r"[ \t\n\r\f\v\u00a0]+")
EDGE_WHITESPACE = re.compile(r"^[ \t\n\r\f\v\u00a0]+|[ \t\n\r\f\v\u00a0]+$")
TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
TAG_NAME_SOURCE = "^[A-Za-z][A-Za-z0-9_-]*$"


def is_blank(s: str) -> bool:
    return WHITESPACE_RUN.sub("", s) == ""


def valid_tag(tag) -> bool:
    return isinstance(tag, str) and TAG_NAME.fullmatch(tag) is not None


CHAR_CLASSES_PATH = Path(__file__).resolve().parent / "char_classes.json"


@functools.lru_cache(maxsize=1)
def _char_classes() -> tuple[frozenset[int], dict[int, str]]:
    """(punctuation_or_symbol code points, lowercase map) from char_classes.json, loaded once."""
    raw = json.loads(CHAR_CLASSES_PATH.read_text(encoding="utf-8"))
    punct = frozenset(cp for first, last in raw["punctuation_or_symbol"] for cp in range(first, last + 1))
    return punct, {int(cp): low for cp, low in raw["lowercase"]}


def _lower_case(s: str) -> str:
    lower = _char_classes()[1]
    return "".join(lower.get(ord(ch), ch) for ch in s)


def _strip_punctuation(s: str) -> str:
    punct = _char_classes()[0]
    return "".join(" " if ord(ch) in punct else ch for ch in s)


def normalize_answer(text: str, *, case_sensitive: bool = False, ignore_punctuation: bool = False) -> str:
    """Lower-case (unless case_sensitive), punctuation to spaces (if ignore_punctuation),
    whitespace runs to one space, trimmed."""
    s = text
    if not case_sensitive:
        s = _lower_case(s)
    if ignore_punctuation:
        s = _strip_punctuation(s)
    return EDGE_WHITESPACE.sub("", WHITESPACE_RUN.sub(" ", s))


def extract_answer(completion: str, tag: str = "answer") -> str | None:
    """The content of the last <tag>...</tag> (leftmost-shortest matches, the last kept), or None."""
    if not valid_tag(tag):
        fail("param_value", f"tag must match {TAG_NAME_SOURCE}, got {tag!r}")
    found = re.findall(f"<{tag}>(.*?)</{tag}>", completion, flags=re.S)
    return found[-1] if found else None
