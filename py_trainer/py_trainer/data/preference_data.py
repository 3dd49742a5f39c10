"""Ranked-group preference data: the JSONL format, its validator and its cleaner.

The format is one group per line::

    {"prompt": "...", "responses": [{"id": "r0", "text": "..."}, ...],
     "ranks": [1, 0, 2], "metadata": {...}}

A response may also carry the annotation SOP's two 1-5 scores, ``"scores": {"correctness": 4,
"helpfulness": 3}`` (integers 1..5, 5 = best; both or neither). They travel through the proto in
the group's metadata under ``response_scores`` (response id -> scores), so the RankedGroup message
is unchanged, and annotation.py flags a ranking that contradicts both.

``ranks[i]`` is the rank of ``responses[i]`` (0 = best) and must be a permutation of 0..K-1
(no ties); ``[]`` (or a missing key) means "not annotated yet", which is what the SampleGroups RPC
and `py-trainer data sample` write for annotators. ``metadata`` is free-form and any other key
(e.g. ``split``, which `Dataset.split` filters on) is kept as is. One name everywhere: the proto's
`RankedGroup.ranks`, the files' ``ranks``, the messages' ``ranks`` (docs/tasks.md, "Ranked groups");
the earlier file key ``preferences`` is refused with a message naming ``ranks``.

What the cleaner (`py-trainer data clean IN OUT`) does, line by line, and never to IN itself:
- drops a line that is not JSON, not a valid group, or whose ranking is not a permutation;
- drops single responses that match a refusal/template pattern (`DEFAULT_REFUSAL_PATTERNS`,
  `DEFAULT_TEMPLATE_PATTERNS`; case-insensitive; ``--refusal-pattern`` replaces both lists), are
  empty, or are identical (after normalisation, ends stripped) to an earlier response of the group
  (a pair of identical responses teaches nothing), and re-ranks the rest in their annotated order;
  a group left with < 2 responses is dropped;
- drops a later line whose prompt duplicates an earlier kept one (compared after normalisation);
- normalises CRLF/CR to LF and interior runs of spaces to one space in prompts and responses,
  never inside fenced (``` / ~~~) code blocks or inline `code` spans, and never touching leading
  indentation or trailing spaces (markdown gives both a meaning).
Every drop is reported with its input line number: ``line N: dropped: <reason>`` for a line,
``line N: dropped response <id>: <reason>`` for one response of a kept line.

Annotation quality checks (gold groups, annotator agreement) live in `annotation.py`.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from google.protobuf import json_format

from py_trainer.core.atomic import write_atomic, write_json_atomic
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

MAX_RESPONSES = 64
"""Largest K per group (C(64, 2) = 2016 training pairs from one group)."""

DEFAULT_REFUSAL_PATTERNS = (
    r"\bI(?:'m|\u2019m| am) (?:sorry|unable|not able)\b",
    r"\bI (?:cannot|can't|can\u2019t|can not|won't|won\u2019t) (?:help|assist|comply|provide|answer)\b",
    r"\bas an AI(?: language model)?\b",
)
DEFAULT_TEMPLATE_PATTERNS = (
    r"\{\{[^}]*\}\}",                        # unfilled {{placeholder}}
    r"\[(?:INSERT|PLACEHOLDER|TODO)\b[^\]]*\]",
    r"<(?:insert|placeholder)\b[^>]*>",
    r"\blorem ipsum\b",
)


# ---------------------------------------------------------------------------------------------
# The format


class GroupFormatError(ValueError):
    """One problem with a group; `key` is the JSON key it concerns ("ranks", "responses[2].id")."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key
        self.message = message


def is_permutation(ranks: Sequence[int], k: int) -> bool:
    """True when `ranks` holds each of 0..k-1 exactly once."""
    return len(ranks) == k and sorted(ranks) == list(range(k))


def check_group(obj: Any, *, need_ranks: bool) -> None:
    """Raise GroupFormatError for the first problem of a JSON group (a parsed line)."""
    if not isinstance(obj, dict):
        raise GroupFormatError("", "expected a JSON object")
    prompt = obj.get("prompt")
    if not isinstance(prompt, str):
        raise GroupFormatError("prompt", "must be a string")
    if not prompt.strip():
        raise GroupFormatError("prompt", "is empty")
    responses = obj.get("responses")
    if not isinstance(responses, list):
        raise GroupFormatError("responses", "must be a list of {id, text} objects")
    if not 2 <= len(responses) <= MAX_RESPONSES:
        raise GroupFormatError("responses", f"needs 2 to {MAX_RESPONSES} responses, got {len(responses)}")
    seen: dict[str, int] = {}
    for i, r in enumerate(responses):
        if not isinstance(r, dict):
            raise GroupFormatError(f"responses[{i}]", "must be an {id, text} object")
        rid, text = r.get("id"), r.get("text")
        if not isinstance(rid, str) or not rid:
            raise GroupFormatError(f"responses[{i}].id", "must be a non-empty string")
        if rid in seen:
            raise GroupFormatError(f"responses[{i}].id", f"{rid!r} repeats responses[{seen[rid]}].id")
        seen[rid] = i
        if not isinstance(text, str):
            raise GroupFormatError(f"responses[{i}].text", "must be a string")
        if "scores" in r:
            check_scores(r["scores"], f"responses[{i}].scores")
    if "preferences" in obj:
        raise GroupFormatError("preferences", 'is not a key of a ranked group: the rank list is "ranks" '
                                              "(ranks[i] = the rank of responses[i], 0 = best)")
    prefs = obj.get("ranks", [])
    if not isinstance(prefs, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in prefs):
        raise GroupFormatError("ranks", "must be a list of integer ranks")
    if prefs or need_ranks:
        if not prefs:
            raise GroupFormatError("ranks", "is empty: the group is not annotated")
        if not is_permutation(prefs, len(responses)):
            raise GroupFormatError("ranks", f"{prefs} is not a permutation of 0..{len(responses) - 1} "
                                            f"(one rank per response, 0 = best, no ties)")
    meta = obj.get("metadata", {})
    if meta is not None and not isinstance(meta, dict):
        raise GroupFormatError("metadata", "must be a JSON object")


SCORE_KEYS = ("correctness", "helpfulness")
"""The annotation SOP's two per-response scores, integers 1..5 (5 = best)."""
SCORES_METADATA_KEY = "response_scores"
"""Where the scores travel in a RankedGroup's metadata: {response id: {correctness, helpfulness}}."""


def check_scores(scores: Any, key: str) -> None:
    """Raise GroupFormatError unless `scores` is {"correctness": 1..5, "helpfulness": 1..5}."""
    if not isinstance(scores, dict):
        raise GroupFormatError(key, 'must be an object {"correctness": 1-5, "helpfulness": 1-5}')
    extra = sorted(set(scores) - set(SCORE_KEYS))
    if extra:
        raise GroupFormatError(f"{key}.{extra[0]}", f"is not a score (the SOP's are {', '.join(SCORE_KEYS)})")
    for k in SCORE_KEYS:
        v = scores.get(k)
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 5:
            raise GroupFormatError(f"{key}.{k}", f"must be an integer 1-5, got {v!r}")


def group_from_json(obj: dict) -> pb.RankedGroup:
    """A checked JSON group as the proto's RankedGroup (per-response scores into
    metadata[SCORES_METADATA_KEY])."""
    g = pb.RankedGroup(prompt=obj["prompt"], ranks=obj.get("ranks") or [])
    scores = {}
    for r in obj["responses"]:
        g.responses.add(id=r["id"], text=r["text"])
        if "scores" in r:
            scores[r["id"]] = dict(r["scores"])
    meta = dict(obj.get("metadata") or {})
    if scores:
        meta[SCORES_METADATA_KEY] = scores
    if meta:
        g.metadata.update(meta)
    return g


def response_scores(g: pb.RankedGroup) -> dict[str, dict[str, int]]:
    """The per-response SOP scores a group carries (response id -> scores); {} when none."""
    if not g.HasField("metadata") or SCORES_METADATA_KEY not in g.metadata.fields:
        return {}
    raw = _ints_back(json_format.MessageToDict(g.metadata)).get(SCORES_METADATA_KEY) or {}
    return {rid: {k: v[k] for k in SCORE_KEYS if k in v} for rid, v in raw.items() if isinstance(v, dict)}


def group_to_json(g: pb.RankedGroup) -> dict:
    """A RankedGroup as one JSONL object (scores back on their responses)."""
    meta = _ints_back(json_format.MessageToDict(g.metadata)) if g.HasField("metadata") else {}
    scores = meta.pop(SCORES_METADATA_KEY, None) or {}
    responses = []
    for r in g.responses:
        item = {"id": r.id, "text": r.text}
        if r.id in scores:
            item["scores"] = scores[r.id]
        responses.append(item)
    return {"prompt": g.prompt, "responses": responses, "ranks": list(g.ranks), "metadata": meta}


def _ints_back(x):
    # protobuf Struct stores every number as a double; give whole numbers back as ints (seeds, indices)
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        return int(x)
    if isinstance(x, dict):
        return {k: _ints_back(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_ints_back(v) for v in x]
    return x


def proto_group_json(g: pb.RankedGroup) -> dict:
    # for validating inline groups with the same rules as file lines
    return {"prompt": g.prompt, "responses": [{"id": r.id, "text": r.text} for r in g.responses],
            "ranks": list(g.ranks)}


def ranking_pairs(ranks: Sequence[int]) -> list[tuple[int, int]]:
    """Every ordered pair (better, worse) of response indices: C(K, 2) of them, best pairs first."""
    order = sorted(range(len(ranks)), key=lambda i: ranks[i])
    return [(order[a], order[b]) for a in range(len(order)) for b in range(a + 1, len(order))]


# ---------------------------------------------------------------------------------------------
# Normalisation and cleaning

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_SPACE_RUN = re.compile(r"(?<=\S) {2,}(?=\S)")


def normalise_text(text: str) -> str:
    """CRLF/CR -> LF; interior runs of spaces -> one space, outside fenced and inline code."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    out = []
    fence: str | None = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            out.append(line)
        elif fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append(line)
        else:
            out.append(_collapse_outside_inline_code(line))
    return "\n".join(out)


def _collapse_outside_inline_code(line: str) -> str:
    spans = [m.span() for m in _INLINE_CODE.finditer(line)]

    def one_space(m: re.Match) -> str:
        inside = any(a <= m.start() < b for a, b in spans)
        return m.group(0) if inside else " "

    return _SPACE_RUN.sub(one_space, line)


@dataclass
class CleanReport:
    """What `clean_file` did; line numbers are 1-based lines of the input file."""

    input: str
    output: str
    lines_read: int = 0
    groups_kept: int = 0
    dropped_lines: list[tuple[int, str]] = field(default_factory=list)
    dropped_responses: list[tuple[int, str, str]] = field(default_factory=list)
    normalised_lines: list[int] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report, one line per drop, in input order."""
        items = [(n, 0, f"line {n}: dropped: {why}") for n, why in self.dropped_lines]
        items += [(n, 1, f"line {n}: dropped response {rid}: {why}") for n, rid, why in self.dropped_responses]
        return [text for _, _, text in sorted(items, key=lambda t: (t[0], t[1]))]

    def to_json(self) -> dict:
        return {"input": self.input, "output": self.output, "lines_read": self.lines_read,
                "groups_kept": self.groups_kept,
                "dropped_lines": [{"line": n, "reason": why} for n, why in self.dropped_lines],
                "dropped_responses": [{"line": n, "id": rid, "reason": why} for n, rid, why in self.dropped_responses],
                "normalised_lines": self.normalised_lines}


def compile_drop_patterns(patterns: Sequence[str] | None) -> list[tuple[re.Pattern, str]]:
    """(regex, label) pairs; None = the default refusal and template patterns."""
    if patterns is None:
        return ([(re.compile(p, re.IGNORECASE), "refusal") for p in DEFAULT_REFUSAL_PATTERNS]
                + [(re.compile(p, re.IGNORECASE), "template") for p in DEFAULT_TEMPLATE_PATTERNS])
    return [(re.compile(p, re.IGNORECASE), "refusal/template") for p in patterns]


def _split_lines(raw: bytes) -> list[bytes]:
    # JSON strings cannot hold a raw CR or LF, so every CR/LF byte is a line break (CRLF, CR, LF files)
    lines = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def clean_groups(raw: bytes, *, drop_patterns: Sequence[str] | None = None,
                 report: CleanReport | None = None) -> tuple[list[dict], CleanReport]:
    """Clean the bytes of a ranked-group JSONL file; returns (kept groups, report)."""
    report = report or CleanReport(input="", output="")
    patterns = compile_drop_patterns(drop_patterns)
    kept: list[dict] = []
    first_line_of: dict[str, int] = {}
    lines = _split_lines(raw)
    report.lines_read = len(lines)
    for n, blob in enumerate(lines, start=1):
        if n == 1 and blob.startswith(b"\xef\xbb\xbf"):
            blob = blob[3:]
        try:
            text = blob.decode("utf-8")
        except UnicodeDecodeError as err:
            report.dropped_lines.append((n, f"not valid UTF-8 (byte {err.start})"))
            continue
        if not text.strip():
            report.dropped_lines.append((n, "blank line"))
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            report.dropped_lines.append((n, f"not valid JSON ({err})"))
            continue
        try:
            check_group(obj, need_ranks=False)
        except GroupFormatError as err:
            report.dropped_lines.append((n, str(err)))
            continue

        prompt = normalise_text(obj["prompt"])
        responses = [dict(r, text=normalise_text(r["text"])) for r in obj["responses"]]
        normalised = prompt != obj["prompt"] or any(a["text"] != b["text"] for a, b in zip(responses, obj["responses"]))
        ranks = list(obj.get("ranks") or [])
        keep_idx, drops = [], []
        first_with_text: dict[str, str] = {}
        for i, r in enumerate(responses):
            why = _response_drop_reason(r["text"], patterns)
            if not why and r["text"].strip() in first_with_text:
                why = f"identical to response {first_with_text[r['text'].strip()]}"
            if not why:
                first_with_text[r["text"].strip()] = r["id"]
            if why:
                drops.append((n, r["id"], why))
            else:
                keep_idx.append(i)
        if len(keep_idx) < 2:
            report.dropped_lines.append(
                (n, "fewer than 2 responses left after dropping " + "; ".join(f"{rid}: {why}" for _, rid, why in drops)))
            continue
        key = prompt.strip()
        if key in first_line_of:
            report.dropped_lines.append((n, f"duplicate prompt (first kept on line {first_line_of[key]})"))
            continue
        first_line_of[key] = n
        obj["prompt"] = prompt
        obj["responses"] = [responses[i] for i in keep_idx]
        if ranks and drops:
            # the remaining responses keep their annotated order, re-numbered 0..K'-1
            kept_ranks = [ranks[i] for i in keep_idx]
            order = sorted(range(len(kept_ranks)), key=lambda j: kept_ranks[j])
            new = [0] * len(kept_ranks)
            for pos, j in enumerate(order):
                new[j] = pos
            obj["ranks"] = new
        report.dropped_responses.extend(drops)
        if normalised:
            report.normalised_lines.append(n)
        kept.append(obj)
    report.groups_kept = len(kept)
    return kept, report


def _response_drop_reason(text: str, patterns: list[tuple[re.Pattern, str]]) -> str | None:
    if not text.strip():
        return "empty response"
    for rx, label in patterns:
        if rx.search(text):
            return f"{label} (matches /{rx.pattern}/)"
    return None


def dump_groups(groups: Iterable[dict]) -> str:
    """JSONL text (LF line endings, UTF-8 kept readable)."""
    return "".join(json.dumps(g, ensure_ascii=False) + "\n" for g in groups)


def clean_file(input_path: Path, output_path: Path, *, drop_patterns: Sequence[str] | None = None) -> CleanReport:
    """Clean IN into OUT (written atomically); IN is only read. Raises OSError if IN is unreadable,
    ValueError if OUT is IN, re.error for a bad pattern."""

    input_path, output_path = Path(input_path), Path(output_path)
    if output_path.exists() and output_path.resolve() == input_path.resolve():
        raise ValueError(f"OUT {output_path} is IN: the cleaner never edits its input")
    compile_drop_patterns(drop_patterns)  # fail on a bad pattern before reading anything
    raw = input_path.read_bytes()
    kept, report = clean_groups(raw, drop_patterns=drop_patterns,
                                report=CleanReport(input=str(input_path), output=str(output_path)))
    write_atomic(output_path, dump_groups(kept))
    return report


def clean_cli(args) -> int:
    """`py-trainer data clean IN OUT [--refusal-pattern RE ...] [--report FILE]`.

    Prints one line per drop to stdout and a summary to stderr; 0 when a group is kept, 1 when
    none is (OUT is written, empty), 2 when IN cannot be read (or OUT is IN, or a pattern is not a
    valid regex).
    """

    try:
        report = clean_file(args.input, args.output, drop_patterns=args.refusal_pattern)
    except re.error as err:
        print(f"py-trainer data clean: bad --refusal-pattern: {err}", file=sys.stderr)
        return 2
    except ValueError as err:
        print(f"py-trainer data clean: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"py-trainer data clean: cannot read {args.input}: {err.strerror or err}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(line)
    print(f"kept {report.groups_kept} of {report.lines_read} lines; dropped {len(report.dropped_lines)} lines "
          f"and {len(report.dropped_responses)} responses; normalised {len(report.normalised_lines)} lines "
          f"-> {args.output}", file=sys.stderr)
    if getattr(args, "report", None):
        write_json_atomic(Path(args.report), report.to_json())
    if report.groups_kept == 0:  # nothing to train on: a failure, whatever the reasons above
        print(f"py-trainer data clean: no group left in {args.output}: every line of {args.input} was dropped",
              file=sys.stderr)
        return 1
    return 0
