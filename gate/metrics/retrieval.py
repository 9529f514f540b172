"""Retrieval metrics: precision@k, recall@k, MRR, nDCG@k and hit rate@k.

Two layers live here:

* Pure functions over a ranked id list and a relevant set (:func:`precision_at_k`,
  :func:`recall_at_k`, :func:`reciprocal_rank`, :func:`ndcg_at_k`, :func:`hit_rate_at_k`, and
  :func:`retrieval_scores` for all five in one pass). They deduplicate the ranked list
  themselves (first rank of each id kept), so calling them on a deduplicated list is the same
  as calling them on the raw one.
* Registered metrics that turn a case and the adapter's retrieved chunks into such a list with
  the run's source matching (:func:`matched_ranking`) and call the pure functions.

Source matching (``run.source_match``):

* ``chunk``: a chunk's matched id is its ``id``.
* ``document``: its ``metadata[run.document_id_key]`` (default ``document_id``) when present
  and non-empty, else its ``id``.
* ``substring``: ``expected_source_ids`` hold strings expected in relevant chunk texts,
  compared case-insensitively (``str.casefold``). Each chunk claims the first expected string
  (in the case's order) that its text contains and that no higher-ranked chunk has claimed; a
  chunk whose strings are all claimed already repeats the first of them (and is dropped by
  deduplication); a chunk containing none is irrelevant and keeps its own identity. So every
  expected string is one relevant item, found at most once, and a chunk counts towards at most
  one expected string: precision·k = recall·|relevant| holds in every mode.

Grades (graded nDCG): a case's ``relevance`` overrides the grade of the ids it lists; an
expected id it does not list has grade 1, any other id grade 0. An id is relevant to nDCG when
its grade is > 0. Gain is ``g`` (``linear``, as trec_eval) or ``2^g - 1`` (``exp2``).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gate.metrics.base import Need, ScoringContext, metric
from gate.model.config import Gain, SourceMatch
from gate.model.dataset import Case
from gate.model.records import CaseOutput, Chunk, MetricResult

# 1 / log2(rank + 1) for 1-based ranks, indexed by 0-based rank (read-only: safe across threads)
_DISCOUNTS: tuple[float, ...] = tuple(1.0 / math.log2(i + 2) for i in range(1024))


def _discount(rank0: int) -> float:
    return _DISCOUNTS[rank0] if rank0 < len(_DISCOUNTS) else 1.0 / math.log2(rank0 + 2)


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def dedup(ranked: Iterable[Hashable]) -> list[Hashable]:
    """The ranked list with each id kept once, at its first (highest) rank."""
    return list(dict.fromkeys(ranked))


def relevant_ranks(ranked: Iterable[Hashable], relevant: Iterable[Hashable]) -> list[tuple[int, Hashable]]:
    """``(rank0, id)`` of each relevant id present in the deduplicated ranking, best rank first.

    ``rank0`` is the 0-based position in the deduplicated list.
    """
    unique = dict.fromkeys(ranked)
    position = dict(zip(unique, range(len(unique)), strict=True))
    return sorted((position[r], r) for r in set(relevant) if r in position)


def _hits(ranks: list[tuple[int, Hashable]], k: int) -> int:
    return bisect_left(ranks, (k,))


def precision_at_k(ranked: Sequence[Hashable], relevant: Iterable[Hashable], k: int) -> float:
    """``hits(k) / k``; the denominator is k even when fewer than k ids were retrieved."""
    _check_k(k)
    return _hits(relevant_ranks(ranked, relevant), k) / k


def recall_at_k(ranked: Sequence[Hashable], relevant: Iterable[Hashable], k: int) -> float:
    """``hits(k) / |relevant|``. Raises ValueError for an empty relevant set (undefined)."""
    _check_k(k)
    relevant = set(relevant)
    if not relevant:
        raise ValueError("recall is undefined for an empty relevant set")
    return _hits(relevant_ranks(ranked, relevant), k) / len(relevant)


def reciprocal_rank(ranked: Sequence[Hashable], relevant: Iterable[Hashable]) -> float:
    """``1 / rank`` of the first relevant id over the whole deduplicated list, 0 when none appears."""
    ranks = relevant_ranks(ranked, relevant)
    return 1.0 / (ranks[0][0] + 1) if ranks else 0.0


def hit_rate_at_k(ranked: Sequence[Hashable], relevant: Iterable[Hashable], k: int) -> float:
    """1.0 when at least one relevant id is in the top k, else 0.0."""
    _check_k(k)
    return 1.0 if _hits(relevant_ranks(ranked, relevant), k) else 0.0


def gain_value(grade: float, gain: Gain) -> float:
    """``g`` for ``linear``, ``2^g - 1`` for ``exp2``; grades <= 0 gain nothing."""
    if grade <= 0:
        return 0.0
    if gain == "linear":
        return float(grade)
    if gain == "exp2":
        return float(2.0**grade - 1.0)
    raise ValueError(f"unknown gain {gain!r} (expected linear or exp2)")


def grade_map(relevant: Iterable[Hashable], grades: Mapping[Hashable, float] | None) -> dict[Hashable, float]:
    """Every id with a positive grade: listed grades override the binary grade 1 of relevant ids."""
    merged: dict[Hashable, float] = dict.fromkeys(relevant, 1.0)
    if grades:
        merged.update(grades)
    return {i: g for i, g in merged.items() if g > 0}


def _ndcg(ranks: list[tuple[int, Hashable]], graded: dict[Hashable, float], k: int, gain: Gain) -> float:
    dcg = 0.0
    for rank0, rid in ranks:
        if rank0 >= k:
            break
        dcg += gain_value(graded[rid], gain) * _discount(rank0)
    ideal = sorted(graded.values(), reverse=True)[:k]
    idcg = 0.0
    for rank0, grade in enumerate(ideal):
        idcg += gain_value(grade, gain) * _discount(rank0)
    if idcg <= 0:
        raise ValueError("nDCG is undefined when no id has a positive grade")
    return dcg / idcg


def ndcg_at_k(
    ranked: Sequence[Hashable],
    relevant: Iterable[Hashable],
    k: int,
    *,
    grades: Mapping[Hashable, float] | None = None,
    gain: Gain = "linear",
) -> float:
    """``DCG@k / IDCG@k``.

    DCG sums ``gain(grade(id)) / log2(rank + 1)`` over the top k of the deduplicated list; IDCG
    is the same sum over the k best grades in descending order. Without ``grades`` every
    relevant id has grade 1 (binary nDCG; both gains then give 1). Raises ValueError when no id
    has a positive grade (IDCG would be 0).
    """
    _check_k(k)
    graded = grade_map(relevant, grades)
    return _ndcg(relevant_ranks(ranked, graded), graded, k, gain)


@dataclass(frozen=True, slots=True)
class RetrievalScores:
    precision_at_k: float
    recall_at_k: float
    reciprocal_rank: float
    # None when no id has a positive grade (graded cases only): nDCG is undefined then
    ndcg_at_k: float | None
    hit_rate_at_k: float


def retrieval_scores(
    ranked: Sequence[Hashable],
    relevant: Iterable[Hashable],
    k: int,
    *,
    grades: Mapping[Hashable, float] | None = None,
    gain: Gain = "linear",
) -> RetrievalScores:
    """All five metrics in one pass (identical values to the single-metric functions).

    Precision, recall, reciprocal rank and hit rate use ``relevant``; nDCG uses the grades
    (:func:`grade_map`) and is None when no id has a positive grade. Raises ValueError for an
    empty relevant set.
    """
    _check_k(k)
    relevant = set(relevant)
    if not relevant:
        raise ValueError("retrieval metrics are undefined for an empty relevant set")
    graded = grade_map(relevant, grades)
    same = graded.keys() == relevant
    ranks = relevant_ranks(ranked, relevant if same else relevant | graded.keys())
    binary = ranks if same else [(r, i) for r, i in ranks if i in relevant]
    hits = _hits(binary, k)
    ndcg = None
    if graded:
        ndcg = _ndcg(ranks if same else [(r, i) for r, i in ranks if i in graded], graded, k, gain)
    return RetrievalScores(
        precision_at_k=hits / k,
        recall_at_k=hits / len(relevant),
        reciprocal_rank=1.0 / (binary[0][0] + 1) if binary else 0.0,
        ndcg_at_k=ndcg,
        hit_rate_at_k=1.0 if hits else 0.0,
    )


# --------------------------------------------------------------------------- source matching


@dataclass(frozen=True)
class _Unmatched:
    """A substring-mode chunk that contains no expected string: equal only to itself by chunk id."""

    chunk_id: str


def document_key(chunk: Chunk, key: str = "document_id") -> str:
    """``metadata[key]`` when present and non-empty, else the chunk id."""
    doc = chunk.metadata.get(key)
    if doc is None or doc == "":
        return chunk.id
    return doc if isinstance(doc, str) else str(doc)


def _substring_keys(chunks: Sequence[Chunk], expected: Sequence[str]) -> list[Hashable]:
    claimed: set[str] = set()
    keys: list[Hashable] = []
    for chunk in chunks:
        text = chunk.text.casefold()
        contained = [e for e in expected if e in text]
        if not contained:
            keys.append(_Unmatched(chunk.id))
            continue
        free = next((e for e in contained if e not in claimed), None)
        key = free if free is not None else contained[0]
        claimed.add(key)
        keys.append(key)
    return keys


@dataclass(frozen=True)
class MatchedRanking:
    ranked: list[Hashable]
    relevant: set[Hashable]
    grades: dict[Hashable, float] | None


def matched_ranking(
    case: Case, chunks: Sequence[Chunk], source_match: SourceMatch, document_id_key: str = "document_id"
) -> MatchedRanking:
    """The ranked matched ids, the relevant set and the grades of a case under ``source_match``.

    ``document_id_key`` names the metadata key holding a chunk's document id (``document`` mode).
    """
    grades: dict[Hashable, float] | None = (
        {k: v for k, v in case.relevance.items()} if case.relevance else None
    )
    ranked, relevant = _matched_keys(chunks, case.expected_source_ids, source_match, document_id_key)
    if source_match == "substring" and grades is not None:
        grades = {str(key).casefold(): g for key, g in grades.items()}
    return MatchedRanking(ranked, relevant, grades)


def _matched_keys(
    chunks: Sequence[Chunk], expected_ids: Sequence[str], source_match: str, document_id_key: str
) -> tuple[list[Hashable], set[Hashable]]:
    """Each chunk's matched id under ``source_match``, and the relevant set."""
    if source_match == "chunk":
        return [c.id for c in chunks], set(expected_ids)
    if source_match == "document":
        return [document_key(c, document_id_key) for c in chunks], set(expected_ids)
    if source_match == "substring":
        expected = list(dict.fromkeys(e.casefold() for e in expected_ids))
        return _substring_keys(chunks, expected), set(expected)
    raise ValueError(f"unknown source_match {source_match!r}")


def expected_flags(
    chunks: Sequence[Chunk],
    expected_ids: Sequence[str],
    source_match: SourceMatch,
    document_id_key: str = "document_id",
) -> list[bool]:
    """Whether each chunk matches an expected source, exactly as the metrics match it
    (``source_match``, ``document_id_key``); in ``substring`` mode a chunk repeating an expected
    string a higher chunk claimed is a match too (the metrics count that string once)."""
    ranked, relevant = _matched_keys(chunks, expected_ids, source_match, document_id_key)
    return [key in relevant for key in ranked]


REASON_NO_POSITIVE_GRADE = "case relevance gives no id a positive grade"

_RETRIEVAL_KINDS = ("qa", "injection")  # unanswerable cases have nothing to retrieve
_NEEDS: tuple[Need, ...] = ("retrieve", "expected_source_ids")


def _scores(case: Case, output: CaseOutput, ctx: ScoringContext) -> RetrievalScores:
    settings = ctx.settings
    matched = matched_ranking(case, output.retrieved or [], settings.source_match, settings.document_id_key)
    return retrieval_scores(
        matched.ranked, matched.relevant, settings.k, grades=matched.grades, gain=settings.ndcg_gain
    )


def _register(name: str, field: str, description: str, *, binary: bool = False) -> None:
    def compute(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
        value = getattr(_scores(case, output, ctx), field)
        if value is None:
            return MetricResult.skipped(REASON_NO_POSITIVE_GRADE)
        return MetricResult.scored(value)

    compute.__name__ = field
    metric(
        name,
        kind="deterministic",
        applies_to=_RETRIEVAL_KINDS,
        needs=_NEEDS,
        description=description,
        binary=binary,
    )(compute)


_register("retrieval.precision_at_k", "precision_at_k", "hits in the top k / k (denominator always k)")
_register("retrieval.recall_at_k", "recall_at_k", "hits in the top k / number of expected sources")
_register("retrieval.mrr", "reciprocal_rank", "1 / rank of the first expected source in the whole list")
_register("retrieval.ndcg_at_k", "ndcg_at_k", "DCG@k / ideal DCG@k (binary, or graded with relevance)")
_register(
    "retrieval.hit_rate_at_k", "hit_rate_at_k", "1 when any expected source is in the top k", binary=True
)
