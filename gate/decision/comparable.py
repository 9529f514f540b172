"""Whether two runs measure the same thing, and what to warn about when they almost do.

- a different ``k``, ``source_match`` or nDCG gain convention is not comparable;
- a different judge model or prompt template hash is not comparable unless
  ``allow_mixed_judges`` (then a warning names what differs);
- a run whose status is not ``complete`` is compared with a warning.
"""

from __future__ import annotations

from gate.core.errors import NotComparableError
from gate.model.artifact import RunArtifact


def check_comparable(baseline: RunArtifact, candidate: RunArtifact, *, allow_mixed_judges: bool) -> list[str]:
    """Raise NotComparableError for runs that measure different things; return warnings."""
    b, c = baseline.meta, candidate.meta
    for field, label in (("k", "k"), ("source_match", "source_match"), ("ndcg_gain", "nDCG gain convention")):
        bv, cv = getattr(b, field), getattr(c, field)
        if bv != cv:
            raise NotComparableError(
                f"runs not comparable: {label} differs (baseline {bv!r}, candidate {cv!r})"
            )
    if b.source_match == "document" and b.document_id_key != c.document_id_key:
        raise NotComparableError(
            "runs not comparable: document_id_key differs "
            f"(baseline {b.document_id_key!r}, candidate {c.document_id_key!r})"
        )
    warnings: list[str] = []
    judge_diffs: list[str] = []
    if (b.judge.provider, b.judge.model) != (c.judge.provider, c.judge.model):
        judge_diffs.append(f"judge model (baseline {b.judge.model!r}, candidate {c.judge.model!r})")
    for name in sorted(set(b.judge.prompts) | set(c.judge.prompts)):
        bh, ch = b.judge.prompts.get(name), c.judge.prompts.get(name)
        if bh != ch:
            judge_diffs.append(f"judge prompt {name} (baseline {_short(bh)}, candidate {_short(ch)})")
    if judge_diffs:
        what = "; ".join(judge_diffs)
        if not allow_mixed_judges:
            raise NotComparableError(
                f"runs not comparable: {what}; re-score the baseline or pass --allow-mixed-judges"
            )
        warnings.append(f"mixed judges allowed: {what}")
    for role, meta in (("baseline", b), ("candidate", c)):
        if meta.status != "complete":
            warnings.append(f"{role} run {meta.run_id} has status {meta.status}: it is compared as it is")
        warnings.extend(f"{role} run: {w}" for w in meta.warnings)
    return warnings


def _short(sha: str | None) -> str:
    return "absent" if sha is None else sha[:12]
