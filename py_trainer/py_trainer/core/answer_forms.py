"""Answers as a chat model writes them: the port of ts_agent/src/agent/core/answer-forms.ts, the
forms task_rewards.py's final_number_match and stops_after_answer read. A base like
SmolLM2-135M-Instruct, asked "What is 23 + 45? Reply with just the number.", answers
"23 + 45 = 68", and sometimes runs on past it; a grader that takes the first number scores the echo
of the question, so the answer is read at the end. Character classes as in task-rewards.ts (ASCII
digits, its whitespace set)."""

from __future__ import annotations

import re
from typing import Sequence

_WS = "[ \t\n\r\f\v\u00a0]"
_NUMBER = "-?[0-9]+(?:\\.[0-9]+)?"
_EDGE_WHITESPACE = re.compile(r"^[ \t\n\r\f\v\u00a0]+|[ \t\n\r\f\v\u00a0]+$")
_AFTER_LAST_EQUALS = re.compile(f"^{_WS}*(-?[0-9]+(?:\\.[0-9]+)?)(?![0-9]|\\.[0-9])")
_BARE_NUMBER = re.compile(f"{_NUMBER}\\.?")
_EQUATION = re.compile(f"[0-9 +\\-*/x\u00d7().]*[0-9)]{_WS}*={_WS}*{_NUMBER}\\.?")


def final_number_of(completion: str, tagged: str | None) -> str | None:
    """The answer a completion gives, never the echoed question: `tagged` (the last <tag>...</tag>'s
    content, from extract_answer), trimmed, when there is one; else the number right after the last
    "=" (a decimal stays whole: "= 6.8" is "6.8"); else the whole trimmed completion when it is one
    number with at most a final "."; else None."""
    if tagged is not None:
        return _EDGE_WHITESPACE.sub("", tagged)
    i = completion.rfind("=")
    if i != -1:
        m = _AFTER_LAST_EQUALS.match(completion[i + 1 :])
        return m.group(1) if m else None
    bare = _EDGE_WHITESPACE.sub("", completion)
    if _BARE_NUMBER.fullmatch(bare):
        return bare[:-1] if bare.endswith(".") else bare
    return None


def is_just_an_answer(completion: str, tag: str) -> bool:
    """Whether the trimmed completion is just an answer and ends there: one number (a final "."
    allowed), one <tag>number</tag>, or one equation ending in its result ("23 + 45 = 68", a final
    "." allowed). `tag` must already be a valid tag name."""
    c = _EDGE_WHITESPACE.sub("", completion)
    tagged = re.fullmatch(f"<{tag}>{_WS}*{_NUMBER}{_WS}*</{tag}>", c)
    return bool(tagged or _BARE_NUMBER.fullmatch(c) or _EQUATION.fullmatch(c))


def trimmed_golds(answers: Sequence[str]) -> list[str]:
    """Gold answers trimmed, blank ones dropped."""
    return [g for g in (_EDGE_WHITESPACE.sub("", a) for a in answers) if g != ""]
