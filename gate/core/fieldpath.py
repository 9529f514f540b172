"""Dotted field paths into records: ``kind``, ``metadata.document_id``, ``metadata.a.b``.

Used wherever configuration names a field of a case or row (slice dimensions
``metadata.FIELD``, ``gate.cluster_by``).
"""

from __future__ import annotations

from typing import Any


def lookup(value: Any, dotted: str) -> Any:
    """Follow ``dotted`` keys through nested dicts; None where a step is missing or not a dict.

    ``lookup({"a": {"b": 1}}, "a.b") == 1``; ``lookup({"a": 1}, "a.b") is None``.
    """
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def record_field(record: object, dotted: str) -> Any:
    """A record's field by dotted path: ``kind`` is the attribute, ``metadata.x.y`` looks into the dict.

    None when the attribute or any key along the path is absent.
    """
    head, _, rest = dotted.partition(".")
    value = getattr(record, head, None)
    return lookup(value, rest) if rest else value
