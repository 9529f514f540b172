"""Slices: the subsets of cases that are summarised and gated separately.

Slice keys are ``dimension=value``: ``all`` (every case), ``kind=qa``, ``tags=topic:billing``,
``metadata.FIELD=value``. ``gate.slices`` lists the dimensions that are summarised
(``kind``, ``tags``, ``tags:NAME`` for the tags ``NAME:...`` only, ``metadata.FIELD``);
``gate.gate_slices`` (default: the same) the ones whose decisions count.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from gate.core.errors import UsageError
from gate.core.fieldpath import lookup
from gate.model.artifact import Row
from gate.model.config import GateConfig

ALL_SLICE = "all"


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))


def slice_keys(row: Row, slices: Sequence[str]) -> list[str]:
    """The slice keys a row belongs to: ``all`` first, then per dimension in ``slices`` order."""
    keys = [ALL_SLICE]
    for dimension in slices:
        if dimension == "kind":
            keys.append(f"kind={row.kind}")
        elif dimension == "tags":
            keys.extend(f"tags={tag}" for tag in row.tags)
        elif dimension.startswith("tags:") and len(dimension) > 5:
            prefix = dimension[5:] + ":"
            keys.extend(f"tags={tag}" for tag in row.tags if tag.startswith(prefix))
        elif dimension.startswith("metadata.") and len(dimension) > 9:
            value = lookup(row.metadata, dimension[9:])
            if value is not None:
                keys.append(f"{dimension}={_value_text(value)}")
        else:
            raise UsageError(
                f"gate.slices: unknown slice dimension {dimension!r} (expected kind, tags, tags:NAME or metadata.FIELD)"
            )
    return list(dict.fromkeys(keys))


def slice_masks(rows: Sequence[Row], slices: Sequence[str]) -> dict[str, np.ndarray]:
    """Slice key -> boolean membership mask over ``rows``: ``all`` first, then the keys sorted."""
    members: dict[str, list[int]] = {}
    if any(d.startswith("metadata.") for d in slices):
        for i, row in enumerate(rows):
            for key in slice_keys(row, slices):
                members.setdefault(key, []).append(i)
    else:
        # Rows of one kind with the same tags share their keys: group the rows first, then
        # each group joins its keys' members at once.
        groups: dict[tuple[str, tuple[str, ...]], list[int]] = {}
        first: dict[tuple[str, tuple[str, ...]], Row] = {}
        for i, row in enumerate(rows):
            signature = (row.kind, tuple(row.tags))
            group = groups.get(signature)
            if group is None:
                group = groups[signature] = []
                first[signature] = row
            group.append(i)
        for common, group in groups.items():
            for key in slice_keys(first[common], slices):
                members.setdefault(key, []).extend(group)
    masks: dict[str, np.ndarray] = {}
    for key in [ALL_SLICE] + sorted(k for k in members if k != ALL_SLICE):
        mask = np.zeros(len(rows), dtype=bool)
        mask[members.get(key, range(len(rows)) if key == ALL_SLICE else [])] = True
        masks[key] = mask
    return masks


def slice_gates(key: str, gate_config: GateConfig) -> bool:
    """Whether decisions on slice ``key`` count toward the overall decision.

    ``all`` always gates. Other slices gate when their dimension is listed in
    ``gate.gate_slices`` (default: every dimension in ``gate.slices``). A ``tags:NAME`` entry
    gates only the tag slices ``tags=NAME:...``.
    """
    if key == ALL_SLICE:
        return True
    dims = gate_config.gate_slices if gate_config.gate_slices is not None else gate_config.slices
    dim, _, value = key.partition("=")
    for entry in dims:
        if entry == dim:
            return True
        name, sep, tag = entry.partition(":")
        if sep and name == "tags" and dim == "tags" and value.startswith(f"{tag}:"):
            return True
    return False
