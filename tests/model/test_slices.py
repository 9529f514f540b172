"""Slices: keys of a row, membership masks, which slices gate."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gate.core.errors import UsageError
from gate.model.artifact import Row
from gate.model.config import GateConfig
from gate.model.slices import slice_gates, slice_keys, slice_masks


def row(case_id: str, **fields: Any) -> Row:
    fields.setdefault("kind", "qa")
    fields.setdefault("status", "ok")
    return Row(case_id=case_id, **fields)


def test_slice_keys_all_kind_tags_tag_name_and_metadata() -> None:
    r = row(
        "a",
        tags=["topic:billing", "hard", "topic:refunds"],
        metadata={"lang": "en", "n": 3, "x": {"y": True}},
    )
    assert slice_keys(r, []) == ["all"]
    assert slice_keys(r, ["kind", "tags"]) == [
        "all",
        "kind=qa",
        "tags=topic:billing",
        "tags=hard",
        "tags=topic:refunds",
    ]
    assert slice_keys(r, ["tags:topic"]) == ["all", "tags=topic:billing", "tags=topic:refunds"]
    assert slice_keys(r, ["metadata.lang", "metadata.n", "metadata.x.y", "metadata.missing"]) == [
        "all",
        "metadata.lang=en",
        "metadata.n=3",
        "metadata.x.y=true",
    ]


def test_slice_keys_unknown_dimension_is_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown slice dimension 'color'"):
        slice_keys(row("a"), ["color"])


def test_slice_gates() -> None:
    cfg = GateConfig(slices=["kind", "tags", "metadata.lang"], gate_slices=["kind", "tags:topic"])
    assert slice_gates("all", cfg)
    assert slice_gates("kind=qa", cfg)
    assert slice_gates("tags=topic:billing", cfg)
    assert not slice_gates("tags=priority:high", cfg)
    assert not slice_gates("metadata.lang=en", cfg)
    default = GateConfig(slices=["kind", "tags"])
    assert slice_gates("tags=anything", default) and slice_gates("kind=injection", default)
    assert not slice_gates("metadata.lang=en", default)


def test_slice_masks_all_first_then_sorted_keys() -> None:
    rows = [row("a", tags=["t:2"]), row("b", kind="injection", tags=["t:1"]), row("c")]
    masks = slice_masks(rows, ["kind", "tags"])
    assert list(masks) == ["all", "kind=injection", "kind=qa", "tags=t:1", "tags=t:2"]
    assert masks["all"].tolist() == [True, True, True]
    assert masks["kind=qa"].tolist() == [True, False, True]
    assert masks["tags=t:1"].tolist() == [False, True, False]
    assert slice_masks([], ["kind"])["all"].dtype == np.bool_
