"""Ranked-group preference data: the JSONL format, its validator and cleaner, and annotator checks.

The format is one group per line::

    {"prompt": "...", "responses": [{"id": "r0", "text": "..."}, ...],
     "preferences": [1, 0, 2], "metadata": {...}}

``preferences[i]`` is the rank of ``responses[i]`` (0 = best) and must be a permutation of
0..K-1 (no ties); ``[]`` (or a missing key) means "not annotated yet", which is what the
SampleGroups RPC and `preference.sample_groups_to_jsonl` write for annotators. ``metadata`` is free-form
and any other key (e.g. ``split``, which `Dataset.split` filters on) is kept as is. The proto's
`RankedGroup` calls the field `ranks`; `group_from_json` / `group_to_json` map between them.

What the cleaner (`py-trainer data clean IN OUT`) does, line by line, and never to IN itself:
- drops a line that is not JSON, not a valid group, or whose ranking is not a permutation;
- drops single responses that match a refusal/template pattern (`DEFAULT_REFUSAL_PATTERNS`,
  `DEFAULT_TEMPLATE_PATTERNS`; case-insensitive; ``--refusal-pattern`` replaces both lists) or are
  empty, and re-ranks the rest in their annotated order; a group left with < 2 responses is dropped;
- drops a later line whose prompt duplicates an earlier kept one (compared after normalisation);
- normalises CRLF/CR to LF and interior runs of spaces to one space in prompts and responses,
  never inside fenced (``` / ~~~) code blocks or inline `code` spans, and never touching leading
  indentation or trailing spaces (markdown gives both a meaning).
Every drop is reported with its input line number: ``line N: dropped: <reason>`` for a line,
``line N: dropped response <id>: <reason>`` for one response of a kept line.

Annotation quality: `insert_gold_groups` puts one expert-ranked gold group (ranks stripped) after
every 10 groups of a batch; `check_annotator_batch` rejects a returned batch if, on any gold group,
some response's rank is more than one position from the expert's (and reports Kendall's tau-b
against gold per gold group); `annotator_agreement` gives Fleiss' kappa across annotators who
ranked the same groups (`stats.fleiss_kappa`; subjects are (group, response) pairs, categories
are rank positions, so kappa is nominal agreement on "which place did this response get").
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from google.protobuf import json_format

from py_trainer.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

MAX_RESPONSES = 64
"""Largest K per group (C(64, 2) = 2016 training pairs from one group)."""
GOLD_EVERY = 10
"""`insert_gold_groups` puts one gold group after every this many groups."""
MAX_GOLD_DEVIATION = 1
"""An annotator may place a response at most this many positions from the expert's rank."""

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
    """One problem with a group; `key` is the JSON key it concerns ("preferences", "responses[2].id")."""

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
    prefs = obj.get("preferences", [])
    if not isinstance(prefs, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in prefs):
        raise GroupFormatError("preferences", "must be a list of integer ranks")
    if prefs or need_ranks:
        if not prefs:
            raise GroupFormatError("preferences", "is empty: the group is not annotated")
        if not is_permutation(prefs, len(responses)):
            raise GroupFormatError("preferences", f"{prefs} is not a permutation of 0..{len(responses) - 1} "
                                                  f"(one rank per response, 0 = best, no ties)")
    meta = obj.get("metadata", {})
    if meta is not None and not isinstance(meta, dict):
        raise GroupFormatError("metadata", "must be a JSON object")


def group_from_json(obj: dict) -> pb.RankedGroup:
    """A checked JSON group as the proto's RankedGroup (`preferences` -> `ranks`)."""
    g = pb.RankedGroup(prompt=obj["prompt"], ranks=obj.get("preferences") or [])
    for r in obj["responses"]:
        g.responses.add(id=r["id"], text=r["text"])
    if obj.get("metadata"):
        g.metadata.update(obj["metadata"])
    return g


def group_to_json(g: pb.RankedGroup) -> dict:
    """A RankedGroup as one JSONL object (`ranks` -> `preferences`)."""
    meta = json_format.MessageToDict(g.metadata) if g.HasField("metadata") else {}
    return {"prompt": g.prompt, "responses": [{"id": r.id, "text": r.text} for r in g.responses],
            "preferences": list(g.ranks), "metadata": _ints_back(meta)}


def _ints_back(x):
    # protobuf Struct stores every number as a double; give whole numbers back as ints (seeds, indices)
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        return int(x)
    if isinstance(x, dict):
        return {k: _ints_back(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_ints_back(v) for v in x]
    return x


def _proto_group_json(g: pb.RankedGroup) -> dict:
    # for validating inline groups with the same rules as file lines
    return {"prompt": g.prompt, "responses": [{"id": r.id, "text": r.text} for r in g.responses],
            "preferences": list(g.ranks)}


_PROTO_KEY = re.compile(r"^preferences")


def load_ranked_groups(ds: pb.Dataset, data_root: Path, field: str, *, need_ranks: bool = True) -> list[pb.RankedGroup]:
    """The ranked groups a Dataset names, validated; errors name the field (and file line).

    Inline groups: ``dataset.inline.groups[3].ranks: ...``; a JSONL file:
    ``dataset.jsonl_path: groups.jsonl line 4: preferences: [0, 0, 1] is not a permutation ...``.
    `split` keeps lines whose "split" equals it; `limit` keeps the first N after that.
    """
    from py_trainer.paths import resolve_under
    from py_trainer.train_config import read_jsonl

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
                check_group(_proto_group_json(g), need_ranks=need_ranks)
            except GroupFormatError as err:
                key = _PROTO_KEY.sub("ranks", err.key)
                raise InvalidArgument(f"{field}.inline.groups[{i}]" + (f".{key}" if key else ""), err.message) from None
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
        ranks = list(obj.get("preferences") or [])
        keep_idx, drops = [], []
        for i, r in enumerate(responses):
            why = _response_drop_reason(r["text"], patterns)
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
            obj["preferences"] = new
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
    from py_trainer.runs import write_atomic

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

    Prints one line per drop to stdout and a summary to stderr; 0 on success, 2 when IN cannot
    be read (or OUT is IN, or a pattern is not a valid regex).
    """
    from py_trainer.runs import write_json_atomic

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
    return 0


# ---------------------------------------------------------------------------------------------
# Rank statistics


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two paired samples (ties adjusted), as scipy.stats.kendalltau; NaN when
    either sample is constant or there are fewer than 2 pairs.

    tau_b = (C - D) / sqrt((n0 - n1) (n0 - n2)), n0 = n(n-1)/2 pairs, n1 / n2 = pairs tied in x / y.
    """
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} values, y has {len(y)}")
    n = len(x)
    c = d = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            if dx == 0:
                tx += 1
            if dy == 0:
                ty += 1
            if dx and dy:
                if dx == dy:
                    c += 1
                else:
                    d += 1
    n0 = n * (n - 1) // 2
    denom = math.sqrt((n0 - tx) * (n0 - ty)) if n0 else 0.0
    return (c - d) / denom if denom > 0 else math.nan


# ---------------------------------------------------------------------------------------------
# Gold groups and annotator checks


def _key(g: pb.RankedGroup) -> str:
    return normalise_text(g.prompt).strip()


def _ranks_by_id(g: pb.RankedGroup) -> dict[str, int]:
    return {r.id: int(rank) for r, rank in zip(g.responses, g.ranks)}


def insert_gold_groups(groups: Sequence[pb.RankedGroup], gold: Sequence[pb.RankedGroup], *,
                       every: int = GOLD_EVERY) -> list[pb.RankedGroup]:
    """The batch for an annotator: after every `every` groups one gold group (cycling through
    `gold`), with its expert ranks and metadata removed so it looks like any other group."""
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    if not gold:
        raise ValueError("no gold groups to insert")
    out: list[pb.RankedGroup] = []
    for i, g in enumerate(groups, start=1):
        out.append(g)
        if i % every == 0:
            expert = gold[(i // every - 1) % len(gold)]
            blind = pb.RankedGroup(prompt=expert.prompt)
            blind.responses.extend(expert.responses)
            out.append(blind)
    return out


@dataclass
class GoldComparison:
    """One gold group as an annotator ranked it."""

    batch_index: int
    """0-based position of the group in the annotator's batch."""
    gold_index: int
    max_deviation: int | None
    """Largest |annotator rank - expert rank| over the group's responses (None: not comparable)."""
    deviations: dict[str, int]
    """Response id -> annotator rank - expert rank, for every response."""
    kendall_tau: float
    """Kendall's tau-b between annotator and expert ranks (1 = same order)."""
    problem: str = ""


@dataclass
class GoldCheckReport:
    """Verdict on one annotator batch."""

    accepted: bool
    reasons: list[str]
    gold_groups_found: int
    mean_kendall_tau: float
    """Mean tau-b against gold over the comparable gold groups (NaN if none)."""
    comparisons: list[GoldComparison]

    def lines(self) -> list[str]:
        head = "ACCEPTED" if self.accepted else "REJECTED"
        out = [f"{head}: {self.gold_groups_found} gold groups, mean Kendall tau-b vs gold "
               f"{self.mean_kendall_tau:.3f}"]
        out += [f"  {r}" for r in self.reasons]
        return out


def check_annotator_batch(batch_groups: Sequence[pb.RankedGroup], gold_groups: Sequence[pb.RankedGroup], *,
                          max_deviation: int = MAX_GOLD_DEVIATION) -> GoldCheckReport:
    """Compare an annotated batch with the expert ranks of the gold groups it contains.

    Gold groups are recognised by prompt (after normalisation), so a gold prompt must not also be
    an ordinary group of the batch. The batch is rejected when it holds
    no gold group, when a gold group is unannotated or not a permutation or its responses differ
    from gold, or when any response of any gold group is ranked more than `max_deviation`
    positions away from the expert's rank.
    """
    gold_by_key = {_key(g): (i, g) for i, g in enumerate(gold_groups)}
    comps: list[GoldComparison] = []
    reasons: list[str] = []
    for b, g in enumerate(batch_groups):
        hit = gold_by_key.get(_key(g))
        if hit is None:
            continue
        gi, gold = hit
        where = f"batch group {b} (gold {gi})"
        want = _ranks_by_id(gold)
        if not g.ranks:
            problem = "not annotated"
        elif not is_permutation(list(g.ranks), len(g.responses)):
            problem = f"ranks {list(g.ranks)} are not a permutation of 0..{len(g.responses) - 1}"
        elif sorted(r.id for r in g.responses) != sorted(want):
            problem = "responses differ from the gold group's"
        else:
            problem = ""
        if problem:
            comps.append(GoldComparison(b, gi, None, {}, math.nan, problem))
            reasons.append(f"{where}: {problem}")
            continue
        got = _ranks_by_id(g)
        ids = sorted(want)
        dev = {rid: got[rid] - want[rid] for rid in ids}
        worst = max(abs(v) for v in dev.values())
        tau = kendall_tau_b([got[r] for r in ids], [want[r] for r in ids])
        comps.append(GoldComparison(b, gi, worst, dev, tau))
        if worst > max_deviation:
            off = ", ".join(f"{rid} {got[rid]} vs {want[rid]}" for rid in ids if abs(dev[rid]) > max_deviation)
            reasons.append(f"{where}: deviates from gold by {worst} positions (> {max_deviation}): {off}")
    if not comps:
        reasons.append("no gold group found in the batch: it cannot be checked")
    taus = [c.kendall_tau for c in comps if not math.isnan(c.kendall_tau)]
    return GoldCheckReport(accepted=not reasons, reasons=reasons, gold_groups_found=len(comps),
                           mean_kendall_tau=sum(taus) / len(taus) if taus else math.nan, comparisons=comps)


def rank_count_table(batches: Mapping[str, Sequence[pb.RankedGroup]]) -> tuple[list[list[int]], list[tuple[str, str]]]:
    """Fleiss' table from several annotators' batches: one row per (prompt, response id) that every
    annotator ranked, one column per rank position, cells = how many annotators gave that rank.

    Groups are matched by prompt; a group one annotator left unannotated is left out for everyone.
    Returns (table, row labels).
    """
    names = list(batches)
    if len(names) < 2:
        raise ValueError(f"Fleiss' kappa needs at least 2 annotators, got {len(names)}")
    per: list[dict[str, dict[str, int]]] = []
    for name in names:
        m: dict[str, dict[str, int]] = {}
        for g in batches[name]:
            if g.ranks and is_permutation(list(g.ranks), len(g.responses)):
                m[_key(g)] = _ranks_by_id(g)
        per.append(m)
    first = names[0]
    table, labels = [], []
    width = 0
    rows: list[tuple[str, str, list[int]]] = []
    for g in batches[first]:
        key = _key(g)
        if not all(key in m for m in per):
            continue
        ids = sorted(per[0][key])
        if not all(sorted(m[key]) == ids for m in per):
            continue
        for rid in ids:
            rows.append((key, rid, [m[key][rid] for m in per]))
            width = max(width, len(ids))
    for key, rid, given in rows:
        counts = [0] * width
        for r in given:
            counts[r] += 1
        table.append(counts)
        labels.append((key, rid))
    return table, labels


@dataclass
class AgreementReport:
    """Agreement across annotators and each annotator against gold."""

    fleiss_kappa: float | None
    subjects: int
    raters: int
    observed_agreement: float
    expected_agreement: float
    gold: dict[str, GoldCheckReport]
    """Per annotator: the gold check of their batch (empty when no gold groups were given)."""


def annotator_agreement(batches: Mapping[str, Sequence[pb.RankedGroup]],
                        gold_groups: Sequence[pb.RankedGroup] = (), *,
                        max_deviation: int = MAX_GOLD_DEVIATION) -> AgreementReport:
    """Fleiss' kappa across annotators (subjects = (group, response), categories = rank position;
    `stats.fleiss_kappa`, as statsmodels' method="fleiss") and each batch's gold check."""
    from py_trainer.stats import fleiss_kappa

    table, _ = rank_count_table(batches)
    if not table:
        raise ValueError("the annotators have no annotated group in common")
    fk = fleiss_kappa(table)
    gold = {name: check_annotator_batch(b, gold_groups, max_deviation=max_deviation)
            for name, b in batches.items()} if gold_groups else {}
    return AgreementReport(fleiss_kappa=fk.kappa, subjects=fk.subjects, raters=fk.raters,
                           observed_agreement=fk.observed_agreement, expected_agreement=fk.expected_agreement,
                           gold=gold)
