"""GRPO reward math: the port of ts_agent/src/agent/core/task-rewards.ts.

The TypeScript file is the source of truth and documents the semantics and the registry; every
function here has the same name in snake_case and returns the same values (``make parity``
checks it). The worker hands these rewards to TRL, so what we train is what the agent grades.
The reward families and the registry are here; the answer text every reward reads
(`normalize_answer`, `extract_answer`, `RewardInputError`) is in answer_text.py and the answer forms
in answer_forms.py (the port of answer-forms.ts); this module re-exports the public names (`__all__`).

Conventions (as in task-rewards.ts)
- Rewards are fractions in [0, 1] (format partial credit in fifths); ``None`` (or NaN) means
  unscorable, as a TRL reward function's None.
- GRPO's advantages are in advantage.py (the port of core/advantage.ts). Plain loops, not numpy:
  the order of float operations matches the TS code.
- Whitespace is [ \\t\\n\\r\\f\\v\\u00a0]; case folding and punctuation (Unicode P* and S*,
  replaced by a space) come from the checked-in table char_classes.json that task-rewards.ts loads too,
  never from this runtime's unicodedata / str.lower (CPython 3.11 has Unicode 14, Node 20 has 17).
- Bad input raises RewardInputError with the same ``kind`` as the TS code, in the same order of checks.
- Registry params use snake_case keys (as on the wire); function options are keyword arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from py_trainer.core.answer_forms import final_number_of, is_just_an_answer, trimmed_golds
from py_trainer.core.answer_text import (TAG_NAME_SOURCE, RewardInputError, extract_answer, fail, is_blank,
                                        normalize_answer, valid_tag)

__all__ = [
    "RewardInputError",
    "Scorer",
    "WeightedScorer",
    "BuiltReward",
    "normalize_answer",
    "extract_answer",
    "exact_match_reward",
    "format_reward",
    "final_number",
    "final_number_match_reward",
    "stops_after_answer_reward",
    "compose_rewards",
    "reward_names",
    "build_reward",
    "compose_reward_specs",
]

Scorer = Callable[[str, Sequence[str]], "float | None"]
"""Scores one completion against the row's gold answers; None = unscorable."""

# ---------------------------------------------------------------------------------------------
# Exact match (the answer text it compares: answer_text.py)


def _words(s: str) -> list[str]:
    return [] if s == "" else s.split(" ")


def _words_match(cand: list[str], gold: list[str], mode: str) -> bool:
    if mode == "exact":
        return cand == gold
    last = 0 if mode == "prefix" else len(cand) - len(gold)
    for start in range(0, last + 1):
        if start + len(gold) <= len(cand) and cand[start : start + len(gold)] == gold:
            return True
    return False


def _check_exact_match_options(tag, match) -> None:
    if not valid_tag(tag):
        fail("param_value", f"tag must match {TAG_NAME_SOURCE}, got {tag!r}")
    if match not in ("exact", "prefix", "contains"):
        fail("param_value", f'match must be "exact", "prefix" or "contains", got {match!r}')


def _gold_words(answers: Sequence[str], case_sensitive: bool, ignore_punctuation: bool) -> list[list[str]]:
    out = []
    for a in answers:
        w = _words(normalize_answer(a, case_sensitive=case_sensitive, ignore_punctuation=ignore_punctuation))
        if w:
            out.append(w)
    return out


def _match_golds(
    completion: str, golds: list[list[str]], tag: str, require_tag: bool, match: str, case_sensitive: bool,
    ignore_punctuation: bool,
) -> float:
    candidate = extract_answer(completion, tag)
    if candidate is None:
        if require_tag:
            return 0.0
        candidate = completion
    cand = _words(normalize_answer(candidate, case_sensitive=case_sensitive, ignore_punctuation=ignore_punctuation))
    for gold in golds:
        if _words_match(cand, gold, match):
            return 1.0
    return 0.0


def exact_match_reward(
    completion: str,
    answers: str | Sequence[str],
    *,
    tag: str = "answer",
    require_tag: bool = True,
    match: str = "exact",
    case_sensitive: bool = False,
    ignore_punctuation: bool = False,
) -> float:
    """1.0 if the completion's final <tag> answer matches any gold answer after normalize_answer,
    else 0.0 (see task-rewards.ts's exactMatchReward); raises kind "empty" if no gold answer is non-empty."""
    _check_exact_match_options(tag, match)
    golds = _gold_words([answers] if isinstance(answers, str) else answers, case_sensitive, ignore_punctuation)
    if not golds:
        fail("empty", "no non-empty gold answer")
    return _match_golds(completion, golds, tag, require_tag, match, case_sensitive, ignore_punctuation)


# ---------------------------------------------------------------------------------------------
# Format


def _count_of(s: str, sub: str) -> int:
    n = 0
    i = s.find(sub)
    while i != -1:
        n += 1
        i = s.find(sub, i + len(sub))
    return n


def format_reward(
    completion: str,
    *,
    think: str = "optional",
    partial_credit: bool = False,
    answer_tag: str = "answer",
    think_tag: str = "think",
) -> float:
    """Whether the completion is [<think>...</think>] <answer>...</answer> with only whitespace
    outside the blocks: 1.0 or 0.0, or with partial_credit the fraction of the five checks passed
    (the checks are listed in task-rewards.ts's formatReward)."""
    if think not in ("optional", "required", "forbidden"):
        fail("param_value", f'think must be "optional", "required" or "forbidden", got {think!r}')
    for name, tag in (("answer_tag", answer_tag), ("think_tag", think_tag)):
        if not valid_tag(tag):
            fail("param_value", f"{name} must match {TAG_NAME_SOURCE}, got {tag!r}")
    if answer_tag == think_tag:
        fail("param_value", "answer_tag and think_tag must differ")
    a_open, a_close = f"<{answer_tag}>", f"</{answer_tag}>"
    t_open, t_close = f"<{think_tag}>", f"</{think_tag}>"
    i_ao, i_ac = completion.find(a_open), completion.find(a_close)
    i_to, i_tc = completion.find(t_open), completion.find(t_close)
    n_ao, n_ac = _count_of(completion, a_open), _count_of(completion, a_close)
    n_to, n_tc = _count_of(completion, t_open), _count_of(completion, t_close)

    one_open = n_ao == 1
    one_close = n_ac == 1 and (n_ao != 1 or i_ao < i_ac)
    answer_block = one_open and one_close
    non_blank = answer_block and not is_blank(completion[i_ao + len(a_open) : i_ac])
    no_think = n_to == 0 and n_tc == 0
    think_block = n_to == 1 and n_tc == 1 and i_to < i_tc
    think_before_answer = think_block and i_tc < i_ao
    if think == "forbidden":
        think_rule = no_think
    elif think == "required":
        think_rule = think_before_answer
    else:
        think_rule = no_think or think_before_answer
    think_ok = answer_block and think_rule
    clean = False
    if think_ok:
        if think_before_answer:
            before = completion[:i_to] + completion[i_tc + len(t_close) : i_ao]
        else:
            before = completion[:i_ao]
        clean = is_blank(before) and is_blank(completion[i_ac + len(a_close) :])
    passed = sum(1 for c in (one_open, one_close, non_blank, think_ok, clean) if c)
    if partial_credit:
        return passed / 5
    return 1.0 if passed == 5 else 0.0


# ---------------------------------------------------------------------------------------------
# Answers as a chat model writes them (the forms: answer_forms.py, the port of answer-forms.ts)


def final_number(completion: str, tag: str = "answer") -> str | None:
    """The answer a completion gives, read where a chat model puts it, never the echoed question:
    the content of the last <tag>...</tag>, trimmed; else the number right after the last "="
    (a decimal stays whole: "= 6.8" is "6.8"); else the whole trimmed completion when it is one
    number with at most a final "."; else None."""
    return final_number_of(completion, extract_answer(completion, tag))


def final_number_match_reward(completion: str, answers: str | Sequence[str], *, tag: str = "answer") -> float:
    """1.0 if final_number(completion) equals a gold answer (both trimmed), else 0.0; raises kind
    "empty" if no gold answer is non-blank."""
    if not valid_tag(tag):
        fail("param_value", f"tag must match {TAG_NAME_SOURCE}, got {tag!r}")
    golds = trimmed_golds([answers] if isinstance(answers, str) else answers)
    if not golds:
        fail("empty", "no non-empty gold answer")
    return _final_number_in(completion, golds, tag)


def _final_number_in(completion: str, golds: list[str], tag: str) -> float:
    got = final_number(completion, tag)
    return 1.0 if got is not None and got in golds else 0.0


def stops_after_answer_reward(completion: str, *, tag: str = "answer") -> float:
    """1.0 if the trimmed completion is just an answer and ends there: one number (a final "."
    allowed), one <tag>number</tag>, or one equation ending in its result ("23 + 45 = 68", a
    final "." allowed); else 0.0. Right or wrong: final_number_match judges that."""
    if not valid_tag(tag):
        fail("param_value", f"tag must match {TAG_NAME_SOURCE}, got {tag!r}")
    return 1.0 if is_just_an_answer(completion, tag) else 0.0


# ---------------------------------------------------------------------------------------------
# Composition and the registry


@dataclass(frozen=True)
class WeightedScorer:
    """A scorer with its weight in a composed reward."""

    score: Scorer
    weight: float


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_weight(name: str, w) -> float:
    if not _is_number(w):
        fail("param_type", f"{name} must be a number, got {type(w).__name__}")
    if math.isnan(w):
        fail("nan", f"{name} must not be NaN")
    if math.isinf(w):
        fail("param_value", f"{name} must be finite, got {w}")
    return float(w)


def compose_rewards(fns: Sequence[WeightedScorer]) -> Scorer:
    """Weighted sum per completion, as TRL's nansum: None (or NaN) scores are skipped; None if every
    scorer returns None."""
    if len(fns) == 0:
        fail("empty", "composeRewards needs at least one reward")
    weights = [_check_weight(f"weights[{i}]", f.weight) for i, f in enumerate(fns)]
    scorers = [f.score for f in fns]

    def composed(completion: str, answers: Sequence[str]) -> float | None:
        total = 0.0
        any_scored = False
        for w, score in zip(weights, scorers):
            v = score(completion, answers)
            if v is None or math.isnan(v):
                continue
            total += w * v
            any_scored = True
        return total if any_scored else None

    return composed


@dataclass(frozen=True)
class BuiltReward:
    """A validated reward spec: effective params (defaults filled) and the unweighted scorer."""

    name: str
    weight: float
    params: dict[str, Any]
    score: Scorer


@dataclass(frozen=True)
class _ParamDef:
    type: type
    default: Any
    allowed: tuple[str, ...] | str | None = None  # enum values, or "tag"


_EXACT_MATCH_PARAMS = {
    "tag": _ParamDef(str, "answer", "tag"),
    "require_tag": _ParamDef(bool, True),
    "match": _ParamDef(str, "exact", ("exact", "prefix", "contains")),
    "case_sensitive": _ParamDef(bool, False),
    "ignore_punctuation": _ParamDef(bool, False),
}


def _exact_match_scorer(p: Mapping[str, Any]) -> Scorer:
    def score(completion: str, answers: Sequence[str]) -> float | None:
        golds = _gold_words(answers, p["case_sensitive"], p["ignore_punctuation"])
        if not golds:
            return None
        return _match_golds(
            completion, golds, p["tag"], p["require_tag"], p["match"], p["case_sensitive"], p["ignore_punctuation"]
        )

    return score


def _format_scorer(p: Mapping[str, Any]) -> Scorer:
    if p["answer_tag"] == p["think_tag"]:
        fail("param_value", "params.answer_tag and params.think_tag must differ")
    kwargs = dict(think=p["think"], partial_credit=p["partial_credit"], answer_tag=p["answer_tag"], think_tag=p["think_tag"])
    return lambda completion, answers: format_reward(completion, **kwargs)


def _final_number_scorer(p: Mapping[str, Any]) -> Scorer:
    def score(completion: str, answers: Sequence[str]) -> float | None:
        golds = trimmed_golds(answers)
        return _final_number_in(completion, golds, p["tag"]) if golds else None

    return score


def _stops_scorer(p: Mapping[str, Any]) -> Scorer:
    return lambda completion, answers: stops_after_answer_reward(completion, tag=p["tag"])


_REGISTRY: dict[str, tuple[dict[str, _ParamDef], Callable[[Mapping[str, Any]], Scorer]]] = {
    "exact_match": (_EXACT_MATCH_PARAMS, _exact_match_scorer),
    "exact_match_lenient": (
        {
            **_EXACT_MATCH_PARAMS,
            "require_tag": _ParamDef(bool, False),
            "match": _ParamDef(str, "contains", ("exact", "prefix", "contains")),
            "ignore_punctuation": _ParamDef(bool, True),
        },
        _exact_match_scorer,
    ),
    "final_number_match": ({"tag": _ParamDef(str, "answer", "tag")}, _final_number_scorer),
    "stops_after_answer": ({"tag": _ParamDef(str, "answer", "tag")}, _stops_scorer),
    "format": (
        {
            "think": _ParamDef(str, "optional", ("optional", "required", "forbidden")),
            "partial_credit": _ParamDef(bool, False),
            "answer_tag": _ParamDef(str, "answer", "tag"),
            "think_tag": _ParamDef(str, "think", "tag"),
        },
        _format_scorer,
    ),
}

_TYPE_NAMES = {bool: "boolean", str: "string"}


def _js_type_name(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def reward_names() -> list[str]:
    """Registry names, sorted."""
    return sorted(_REGISTRY)


def build_reward(spec: Mapping[str, Any]) -> BuiltReward:
    """Validates a reward spec {name, weight, params} against the registry and builds its
    (unweighted) scorer; errors name the field, with task-rewards.ts's buildReward kinds."""
    name = spec.get("name")
    if not isinstance(name, str) or name not in _REGISTRY:
        fail("unknown_reward", f"name: unknown reward {name!r}; known: {', '.join(reward_names())}")
    defs, make = _REGISTRY[name]
    for key in spec:
        if key not in ("name", "weight", "params"):
            fail("unknown_param", f"{key}: a reward spec has name, weight and params")
    weight = 1.0 if spec.get("weight") is None else _check_weight("weight", spec["weight"])
    given = spec.get("params")
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        fail("param_type", "params must be an object")
    for key in given:
        if key not in defs:
            fail("unknown_param", f"params.{key}: {name} takes {', '.join(sorted(defs))}")
    params: dict[str, Any] = {}
    for key in sorted(defs):
        d = defs[key]
        value = given[key] if key in given else d.default
        if type(value) is not d.type:
            fail("param_type", f"params.{key} must be a {_TYPE_NAMES[d.type]}, got {_js_type_name(value)}")
        if d.allowed == "tag" and not valid_tag(value):
            fail("param_value", f"params.{key} must match {TAG_NAME_SOURCE}, got {value!r}")
        if isinstance(d.allowed, tuple) and value not in d.allowed:
            fail("param_value", f"params.{key} must be one of {', '.join(d.allowed)}, got {value!r}")
        params[key] = value
    return BuiltReward(name=name, weight=weight, params=params, score=make(params))


def compose_reward_specs(specs: Sequence[Mapping[str, Any]]) -> Scorer:
    """build_reward for each spec, then compose_rewards with the specs' weights."""
    if len(specs) == 0:
        fail("empty", "no reward specs")
    built = [build_reward(s) for s in specs]
    return compose_rewards([WeightedScorer(score=b.score, weight=b.weight) for b in built])
