"""Hints for a name that is not known: "did you mean ..." and other tools' field names.

An unknown key is usually a typo (``sorce_match``) or a name from another evaluation tool
(``ground_truth``, ``retrieval_context``). :func:`unknown_key_hint` answers both for a pydantic
model and an error location: a model may declare ``FOREIGN_KEYS`` (a ``ClassVar`` mapping other
tools' names to a hint naming ours), which wins; otherwise the closest declared key by
``difflib.get_close_matches`` (ratio >= :data:`CUTOFF`), if any.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any

# difflib's default: "sorce_match" -> "source_match", "f1" alone does not match "token_f1".
CUTOFF = 0.6


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """``"did you mean X?"`` for the closest choice to ``word``, or None when none is close.

    Dotted names (metric names) are also compared by their last part, so ``answer.f1`` finds
    ``answer.token_f1`` and ``recal_at_k`` finds ``retrieval.recall_at_k``.
    """
    options = sorted(set(choices))
    match = difflib.get_close_matches(word, options, n=1, cutoff=CUTOFF)
    if not match:
        word_head, _, word_tail = word.rpartition(".")
        scored = []
        for option in options:
            head, _, tail = option.rpartition(".")
            if word_head and head and word_head != head:
                continue
            ratio = difflib.SequenceMatcher(None, word_tail, tail).ratio()
            if ratio >= CUTOFF or (len(word_tail) >= 2 and word_tail in tail.split("_")):
                scored.append((-ratio, option))
        match = [min(scored)[1]] if scored else []
    return f"did you mean {match[0]}?" if match else None


def _models_in(annotation: Any) -> list[type]:
    """The pydantic model classes an annotation may hold (through Optional, list, dict, unions)."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type] = []
    origin = typing.get_origin(annotation)
    if origin is not None or isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            found.extend(_models_in(arg))
    return found


def _is_mapping(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in {dict, typing.Union, types.UnionType}:
        return origin is dict or any(_is_mapping(a) for a in typing.get_args(annotation))
    return False


def model_at(model: type, loc: Sequence[str | int]) -> type | None:
    """The model class that holds the last part of ``loc`` (a pydantic error location), if any.

    ``("gate", "metrics", "answer.token_f1", "mni")`` walks Config.gate -> GateConfig.metrics
    (a dict: the key ``answer.token_f1`` is skipped) -> GateMetricConfig, which holds ``mni``.
    """
    current: type | None = model
    parts = list(loc[:-1])
    i = 0
    while i < len(parts):
        if current is None:
            return None
        field = getattr(current, "model_fields", {}).get(parts[i])
        if field is None:
            return None
        models = _models_in(field.annotation)
        skip = 1 if _is_mapping(field.annotation) or typing.get_origin(field.annotation) is list else 0
        # a dict key or a list index follows a container field
        if skip and i + 1 < len(parts):
            i += 1
        current = models[0] if len(models) == 1 else None
        i += 1
    return current


def unknown_key_hint(model: type, loc: Sequence[str | int]) -> str | None:
    """A hint for the unknown key at ``loc`` in ``model``: another tool's name, else a close key."""
    if not loc:
        return None
    holder = model_at(model, loc)
    if holder is None:
        return None
    key = str(loc[-1])
    foreign: dict[str, str] = getattr(holder, "FOREIGN_KEYS", {})
    if key in foreign:
        return foreign[key]
    return did_you_mean(key, getattr(holder, "model_fields", {}))
