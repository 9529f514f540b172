"""The shared base of every boundary model: unknown keys are errors, not silently dropped.

A typo such as ``expected_source_id`` in a case, ``marign`` in a config or an extra key in an
artifact written by someone else must fail validation by name rather than vanish.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A pydantic model that forbids keys it does not declare.

    A field's docstring (the string literal under it) is its description: the generated
    reference pages and JSON Schemas show it (``python scripts/gen_reference.py``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
