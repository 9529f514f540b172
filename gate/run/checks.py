"""End-of-run warnings: a run that completed but measured less than it seems to.

Each check looks at the rows of one run and returns one line:

* **Failed cases**: more than ``FAILURE_WARNING_RATE`` (10%) of the cases failed (the adapter
  raised or timed out). Failed cases enter no mean, so every mean describes only the cases
  that ran; when the failures are the hard questions (long, unusual, those whose retrieval
  breaks), the means look better than the pipeline is. Below ``run.max_failure_rate`` the run
  still completes with exit 0, so this line (on stderr, in ``run.json`` ``warnings``, in
  ``ragproof report`` and in a comparison that uses the run) is the only sign. It names the
  most common error, cut to 60 characters.

The others look at the cases that ran (adapter failures excluded):

* **No match**: retrieval ran on cases with ``expected_source_ids``, yet no retrieved chunk
  matched any expected id on any of them (under ``run.source_match``). Usually the ids live
  elsewhere: a metadata key (``source``, ``ref_doc_id``, ``file_name``) rather than the chunk id.
  The line names a retrieved id, an expected id (each cut to 60 characters) and the metadata
  keys seen, and the setting that can match: ``substring`` when the expected ids are texts
  (they hold whitespace, as reference contexts imported with ``--contexts-as-sources`` do).
* **No expected answer**: the pipeline answered, answer metrics were selected, but none was
  scored on any case because no case has ``expected_answer``: answer quality is not measured.
* **Short retrieval**: retrieve() returned fewer than ``k`` chunks on more than half of the
  cases with retrieval; @k metrics then count the missing ranks as misses (precision@k keeps
  dividing by ``k``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gate.core.errors import clipped
from gate.metrics.base import REASON_NO_EXPECTED_ANSWER, MetricSpec
from gate.metrics.retrieval import matched_ranking
from gate.model.artifact import Row, error_groups
from gate.model.config import SourceMatch
from gate.model.dataset import Case

# Above this share of failed cases a completed run says so (run.max_failure_rate makes it exit 4).
FAILURE_WARNING_RATE = 0.10


def _failed_cases(rows: Sequence[Row]) -> str | None:
    failed = sum(1 for row in rows if row.status != "ok")
    if not rows or failed / len(rows) <= FAILURE_WARNING_RATE:
        return None
    error, times = error_groups(rows)[0]
    return (
        f"{failed} of {len(rows)} cases failed ({failed / len(rows):.0%}, above {FAILURE_WARNING_RATE:.0%}; "
        f"most often {clipped(error)!r}, {times}x): failed cases enter no mean, so the means describe "
        f"only the {len(rows) - failed} that ran and can look better than the pipeline is"
    )


def _no_match(
    rows: Sequence[Row], cases: Mapping[str, Case], source_match: SourceMatch, document_id_key: str
) -> str | None:
    checked = 0
    retrieved_id, expected_id = "", ""
    keys: set[str] = set()
    for row in rows:
        case = cases.get(row.case_id)
        if row.status != "ok" or not row.retrieved or case is None or not case.expected_source_ids:
            continue
        if case.kind == "unanswerable":  # retrieval metrics do not apply to it
            continue
        matched = matched_ranking(case, row.retrieved, source_match, document_id_key)
        if any(key in matched.relevant for key in matched.ranked):
            return None
        checked += 1
        retrieved_id = retrieved_id or row.retrieved[0].id
        expected_id = expected_id or case.expected_source_ids[0]
        for chunk in row.retrieved:
            keys.update(chunk.metadata)
    if checked == 0:
        return None
    seen = ", ".join(sorted(keys)[:12]) if keys else "none"
    if source_match == "substring":
        hint = (
            "no expected text occurs inside a retrieved chunk: the chunks may be cut differently from "
            "the reference contexts; expected ids that name chunks or documents need run.source_match "
            "chunk or document"
        )
    elif looks_like_text(expected_id):
        # ids with spaces are texts (reference contexts): no id or metadata key can equal them
        hint = "the expected ids look like texts: set run.source_match: substring"
    elif source_match != "document":
        hint = (
            "set run.source_match: document and run.document_id_key to the metadata key that holds the "
            "dataset's ids"
        )
    else:
        hint = f"set run.document_id_key (now {document_id_key!r}) to the metadata key that holds the dataset's ids"
    return (
        f"no retrieved chunk matched any expected source id on {checked} case(s) with "
        f"source_match {source_match}: retrieved ids look like {clipped(retrieved_id)!r}, expected ids like "
        f"{clipped(expected_id)!r}; metadata keys seen: {seen}; {hint}"
    )


def looks_like_text(source_id: str) -> bool:
    """True for an expected source id that is a passage rather than an id: it has whitespace."""
    return any(ch.isspace() for ch in source_id.strip())


def _no_expected_answer(rows: Sequence[Row], specs: Sequence[MetricSpec]) -> str | None:
    names = [s.name for s in specs if "expected_answer" in s.needs and s.gate_by_default]
    if not names:
        return None
    missing = 0
    for row in rows:
        if row.status != "ok" or row.answer is None:  # nothing to compare with an expected answer
            continue
        for name in names:
            result = row.metrics.get(name)
            if result is None:
                continue
            if result.status == "scored":
                return None
            if result.reason == REASON_NO_EXPECTED_ANSWER:
                missing += 1
                break
    if missing == 0:
        return None
    return (
        f"every answer metric ({', '.join(names)}) was skipped: no case has expected_answer "
        f"({missing} case(s) answered), so answer quality is not measured; add expected_answer to the dataset"
    )


def _short_retrieval(rows: Sequence[Row], k: int) -> str | None:
    sizes = [len(row.retrieved) for row in rows if row.status == "ok" and row.retrieved is not None]
    short = sum(1 for n in sizes if n < k)
    if not sizes or 2 * short <= len(sizes):
        return None
    median = sorted(sizes)[(len(sizes) - 1) // 2]  # the lower median: a size that occurred
    return (
        f"retrieve returned fewer than k={k} chunks on {short} of {len(sizes)} case(s) "
        f"(median {median}): @k metrics count the missing ranks as misses; lower run.k or raise "
        "the retriever's own k"
    )


def run_warnings(
    rows: Sequence[Row],
    cases: Mapping[str, Case],
    specs: Sequence[MetricSpec],
    *,
    k: int,
    source_match: SourceMatch,
    document_id_key: str,
) -> list[str]:
    """The end-of-run warnings for ``rows`` (see the module docstring), in a fixed order."""
    found = (
        _failed_cases(rows),
        _no_match(rows, cases, source_match, document_id_key),
        _no_expected_answer(rows, specs),
        _short_retrieval(rows, k),
    )
    return [w for w in found if w is not None]
