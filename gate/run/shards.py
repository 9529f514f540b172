"""Shards: splitting one run's cases over N jobs and joining their artifacts again.

A case's shard is a stable function of its id (sha256, not Python's per-process hashing), so
``--shard I/N`` in N jobs covers every case exactly once on any machine, and ``merge`` checks
that the parts are distinct shards of one run before joining them.
"""

from __future__ import annotations

import hashlib

from gate.core.errors import DataError, UsageError
from gate.model.artifact import CostInfo, Row, RunArtifact, RunMeta, RunStatus, ShardInfo
from gate.run.artifact_io import new_run_id, utc_now

Shard = tuple[int, int]  # (1-based index, count)


def shard_of(case_id: str, count: int) -> int:
    """The 1-based shard of ``case_id`` among ``count`` shards.

    A stable partition: the first 8 bytes of sha256(case id) modulo ``count``, plus one. It
    does not depend on Python's per-process string hashing, the case order or the machine.
    """
    digest = hashlib.sha256(case_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def in_shard(case_id: str, shard: Shard | None) -> bool:
    """True when ``case_id`` belongs to ``shard`` (index, count); every case does for None."""
    return shard is None or shard_of(case_id, shard[1]) == shard[0]


def parse_shard(text: str) -> Shard:
    """``"I/N"`` -> (I, N) with 1 <= I <= N; UsageError otherwise."""
    index, sep, count = text.partition("/")
    if not sep or not index.strip().isdigit() or not count.strip().isdigit():
        raise UsageError(f"--shard: expected I/N such as 2/4, got {text!r}")
    i, n = int(index), int(count)
    if not 1 <= i <= n:
        raise UsageError(f"--shard: expected 1 <= I <= N, got {text!r}")
    return i, n


# RunMeta fields every shard of one run must agree on.
_MUST_AGREE: tuple[str, ...] = (
    "dataset",
    "config_hash",
    "judge",
    "k",
    "source_match",
    "document_id_key",
    "ndcg_gain",
    "metrics",
    "slices",
)


def _merged_status(parts: list[RunArtifact], all_shards: bool) -> RunStatus:
    statuses = {p.meta.status for p in parts}
    if "aborted:budget" in statuses:
        return "aborted:budget"
    if "partial" in statuses or not all_shards:
        return "partial"
    return "complete"


def _shard(part: RunArtifact) -> ShardInfo:
    """The part's shard; only for parts that :func:`check_mergeable` accepted (all are shards)."""
    if part.meta.shard is None:
        raise DataError(f"{part.source}: not a shard (run.json has no shard); only shards are merged")
    return part.meta.shard


def check_mergeable(parts: list[RunArtifact]) -> None:
    """DataError unless ``parts`` are distinct shards of one run (same dataset, config, judge)."""
    if not parts:
        raise UsageError("merge: no parts given")
    first = parts[0]
    seen: dict[int, str] = {}
    for part in parts:
        shard = _shard(part)
        if shard.count != _shard(first).count:
            raise DataError(
                f"{part.source}: shard count {shard.count} differs from {first.source}'s {_shard(first).count}"
            )
        if shard.index in seen:
            raise DataError(f"{part.source}: shard {shard.index} also given as {seen[shard.index]}")
        seen[shard.index] = part.source
        for name in _MUST_AGREE:
            mine, theirs = getattr(part.meta, name), getattr(first.meta, name)
            if mine != theirs:
                what = {"config_hash": "config hash", "judge": "judge"}.get(name, name)
                raise DataError(
                    f"{part.source}: {what} differs from {first.source}'s; parts of one run must agree"
                )


def merge_artifacts(parts: list[RunArtifact]) -> tuple[RunMeta, list[Row]]:
    """One run's meta and rows (in dataset order) from its shards; the summary is recomputed by the caller.

    Missing shards make the merged status ``partial``; a budget abort in any part makes it
    ``aborted:budget``. Costs add up; the wall time is the longest part's.
    """
    check_mergeable(parts)
    first = parts[0]
    rows: list[Row] = []
    owner: dict[str, str] = {}
    for part in parts:
        for row in part.rows:
            if row.case_id in owner:
                raise DataError(f"{part.source}: case {row.case_id!r} also in {owner[row.case_id]}")
            owner[row.case_id] = part.source
            rows.append(row)
    rows.sort(key=lambda r: (r.position is None, r.position if r.position is not None else 0, r.case_id))
    count = _shard(first).count
    cost = CostInfo(
        usd=sum(p.meta.cost.usd for p in parts),
        input_tokens=sum(p.meta.cost.input_tokens for p in parts),
        output_tokens=sum(p.meta.cost.output_tokens for p in parts),
        judge_calls=sum(p.meta.cost.judge_calls for p in parts),
        cache_hits=sum(p.meta.cost.cache_hits for p in parts),
        estimated=any(p.meta.cost.estimated for p in parts),
    )
    meta = first.meta.model_copy(
        update={
            "run_id": new_run_id(),
            "created_at": utc_now(),
            "shard": None,
            "status": _merged_status(parts, len(parts) == count),
            "cost": cost,
            "wall_time_s": max(p.meta.wall_time_s for p in parts),
            # each shard checked its own cases: its warnings are kept, named by shard
            "warnings": [
                f"shard {_shard(p).index}/{count}: {w}"
                for p in sorted(parts, key=lambda p: _shard(p).index)
                for w in p.meta.warnings
            ],
        }
    )
    return meta, rows
