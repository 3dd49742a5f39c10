"""Annotation quality for ranked groups: gold groups hidden in a batch, per-annotator gold checks,
and agreement across annotators (`py-trainer data check-annotators`).

`insert_gold_groups` puts one expert-ranked gold group (ranks stripped) after every 10 groups of a
batch; `check_annotator_batch` rejects a returned batch if, on any gold group, some response's rank
is more than one position from the expert's (and reports Kendall's tau-b against gold per gold
group, `stats.kendall_tau_b`); `annotator_agreement` gives Fleiss' kappa across annotators who
ranked the same groups (`stats.fleiss_kappa`; subjects are (group, response) pairs, categories are
rank positions, so kappa is nominal agreement on "which place did this response get"), as the
annotation SOP names it, next to Kendall's W per group (`stats.kendall_w`: the positions of one
permutation are not independent ratings, which Fleiss' kappa assumes; W is the measure for
rankings); `score_contradictions` flags a ranking that puts a response above one that the same
annotator scored higher on BOTH of the SOP's 1-5 scores (correctness and helpfulness).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from py_trainer.core import stats
from py_trainer.data.preference_data import is_permutation, normalise_text, ranking_pairs, response_scores
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

GOLD_EVERY = 10
"""`insert_gold_groups` puts one gold group after every this many groups."""
MAX_GOLD_DEVIATION = 1
"""An annotator may place a response at most this many positions from the expert's rank."""


# ---------------------------------------------------------------------------------------------
# Gold groups and annotator checks


def _key(g: pb.RankedGroup) -> str:
    return normalise_text(g.prompt).strip()


def _ranks_by_id(g: pb.RankedGroup) -> dict[str, int]:
    return {r.id: int(rank) for r, rank in zip(g.responses, g.ranks)}


def _annotated_ranks(groups: Sequence[pb.RankedGroup]) -> dict[str, dict[str, int]]:
    """prompt key -> {response id: rank} for every group of one batch with a valid ranking."""
    return {_key(g): _ranks_by_id(g) for g in groups
            if g.ranks and is_permutation(list(g.ranks), len(g.responses))}


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


def _tied_as_gold(got: dict[str, int], want: dict[str, int], texts: dict[str, str]) -> dict[str, int]:
    """The annotator's ranks with each set of identical responses (same text, ends stripped) put in
    the expert's order: swapping two identical responses is no deviation from gold."""
    by_text: dict[str, list[str]] = {}
    for rid, text in texts.items():
        by_text.setdefault(text.strip(), []).append(rid)
    out = dict(got)
    for ids in by_text.values():
        if len(ids) > 1:
            for rid, rank in zip(sorted(ids, key=lambda r: want[r]), sorted(got[r] for r in ids)):
                out[rid] = rank
    return out


def check_annotator_batch(batch_groups: Sequence[pb.RankedGroup], gold_groups: Sequence[pb.RankedGroup], *,
                          max_deviation: int = MAX_GOLD_DEVIATION) -> GoldCheckReport:
    """Compare an annotated batch with the expert ranks of the gold groups it contains.

    Gold groups are recognised by prompt (after normalisation), so a gold prompt must not also be
    an ordinary group of the batch. The batch is rejected when it holds
    no gold group, when a gold group is unannotated or not a permutation or its responses differ
    from gold, or when any response of any gold group is ranked more than `max_deviation`
    positions away from the expert's rank. Identical responses are interchangeable: their order
    among themselves is never a deviation (`_tied_as_gold`).
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
        got = _tied_as_gold(_ranks_by_id(g), want, {r.id: r.text for r in gold.responses})
        ids = sorted(want)
        dev = {rid: got[rid] - want[rid] for rid in ids}
        worst = max(abs(v) for v in dev.values())
        tau = stats.kendall_tau_b([got[r] for r in ids], [want[r] for r in ids])
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
    per = [_annotated_ranks(batches[name]) for name in names]
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
class ScoreContradiction:
    """A ranking that contradicts both SOP scores: `better` is ranked above `worse`, yet `worse`
    has the higher correctness AND the higher helpfulness."""

    batch_index: int
    better: str
    worse: str
    better_scores: dict[str, int]
    worse_scores: dict[str, int]

    def line(self) -> str:
        b, w = self.better_scores, self.worse_scores
        return (f"group {self.batch_index}: ranks {self.better} above {self.worse}, but {self.worse} scores higher on "
                f"correctness ({w['correctness']} vs {b['correctness']}) and helpfulness ({w['helpfulness']} vs {b['helpfulness']})")


def score_contradictions(groups: Sequence[pb.RankedGroup]) -> list[ScoreContradiction]:
    """Every (better, worse) pair of an annotated group whose scores both say the opposite."""
    out: list[ScoreContradiction] = []
    for b, g in enumerate(groups):
        scores = response_scores(g)
        if not scores or not g.ranks or not is_permutation(list(g.ranks), len(g.responses)):
            continue
        ids = [r.id for r in g.responses]
        for hi, lo in ranking_pairs(list(g.ranks)):
            sb, sw = scores.get(ids[hi]), scores.get(ids[lo])
            if not sb or not sw or len(sb) < 2 or len(sw) < 2:
                continue
            if sw["correctness"] > sb["correctness"] and sw["helpfulness"] > sb["helpfulness"]:
                out.append(ScoreContradiction(b, ids[hi], ids[lo], sb, sw))
    return out


def kendall_w_by_group(batches: Mapping[str, Sequence[pb.RankedGroup]]) -> list[float]:
    """Kendall's W of the annotators' ranks for every group all of them ranked (same responses);
    groups where W is undefined are left out."""
    names = list(batches)
    per = [_annotated_ranks(batches[name]) for name in names]
    out: list[float] = []
    for g in batches[names[0]]:
        key = _key(g)
        if not all(key in m for m in per):
            continue
        ids = sorted(per[0][key])
        if len(ids) < 2 or not all(sorted(m[key]) == ids for m in per):
            continue
        w = stats.kendall_w([[m[key][rid] for rid in ids] for m in per]).w
        if w is not None:
            out.append(w)
    return out


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
    kendall_w_mean: float = math.nan
    """Mean over the common groups of Kendall's W (1 = the annotators order every group alike);
    NaN when no group has a defined W."""
    kendall_w_groups: int = 0
    contradictions: dict[str, list[ScoreContradiction]] = None  # type: ignore[assignment]
    """Per annotator: rankings that contradict both of their own SOP scores."""

    def lines(self) -> list[str]:
        k = "undefined" if self.fleiss_kappa is None or self.fleiss_kappa != self.fleiss_kappa else f"{self.fleiss_kappa:.3f}"
        w = "undefined" if self.kendall_w_mean != self.kendall_w_mean else f"{self.kendall_w_mean:.3f}"
        out = [f"Fleiss' kappa on rank positions {k} ({self.subjects} (group, response) subjects, {self.raters} annotators; "
               f"the SOP's measure, but it treats a permutation's positions as independent)",
               f"Kendall's W {w} (mean over {self.kendall_w_groups} groups; the agreement measure for rankings)"]
        for name, found in (self.contradictions or {}).items():
            for c in found:
                out.append(f"{name}: {c.line()}")
        return out


def annotator_agreement(batches: Mapping[str, Sequence[pb.RankedGroup]],
                        gold_groups: Sequence[pb.RankedGroup] = (), *,
                        max_deviation: int = MAX_GOLD_DEVIATION) -> AgreementReport:
    """Fleiss' kappa across annotators (subjects = (group, response), categories = rank position;
    `stats.fleiss_kappa`, as statsmodels' method="fleiss") and each batch's gold check."""
    table, _ = rank_count_table(batches)
    if not table:
        raise ValueError("the annotators have no annotated group in common")
    fk = stats.fleiss_kappa(table)
    gold = {name: check_annotator_batch(b, gold_groups, max_deviation=max_deviation)
            for name, b in batches.items()} if gold_groups else {}
    ws = kendall_w_by_group(batches)
    return AgreementReport(fleiss_kappa=fk.kappa, subjects=fk.subjects, raters=fk.raters,
                           observed_agreement=fk.observed_agreement, expected_agreement=fk.expected_agreement,
                           gold=gold, kendall_w_mean=sum(ws) / len(ws) if ws else math.nan, kendall_w_groups=len(ws),
                           contradictions={name: score_contradictions(b) for name, b in batches.items()})
