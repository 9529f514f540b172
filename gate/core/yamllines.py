"""Lines of a YAML document for error locations: a pydantic ``loc`` -> the line that holds it.

``yaml.safe_load`` returns plain dicts and lists without positions, so a validation error
could only name the dotted field. :meth:`YamlLines.load` keeps PyYAML's node graph (whose marks
carry positions) of the one parse the data is built from, and :meth:`YamlLines.line_of` walks it
along the error location: mapping keys by
their scalar value, sequence items by index. The line named is the one of the deepest node
found: the key itself for an unknown or wrongly-typed key, the enclosing key for a missing one
(``adapter.target`` absent -> the ``adapter:`` line). Lines are 1-based.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml


class YamlLines:
    """Line lookup over one YAML document (the first, as ``safe_load`` reads)."""

    def __init__(self, root: yaml.Node | None) -> None:
        self._root = root

    @classmethod
    def load(cls, text: str) -> tuple[Any, YamlLines]:
        """``yaml.safe_load(text)`` and its lines from one parse (what ``safe_load`` does
        inside: compose the node graph, then construct the data from it). Raises YAMLError."""
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
        return data, cls(root)

    @property
    def root(self) -> yaml.Node | None:
        return self._root

    def line_of(self, loc: Sequence[str | int], node: yaml.Node | None = None) -> int | None:
        """The 1-based line of the deepest node along ``loc`` (from ``node``, default the root)."""
        current = node if node is not None else self._root
        if current is None:
            return None
        line = current.start_mark.line + 1
        for part in loc:
            found = self.child(current, part)
            if found is None:
                break
            key, current = found
            line = (key or current).start_mark.line + 1
        return line

    @staticmethod
    def child(node: yaml.Node, part: str | int) -> tuple[yaml.Node | None, yaml.Node] | None:
        """(key node or None, value node) of ``node``'s entry ``part``, or None when absent."""
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                    return key, value
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            return None, node.value[part]
        return None
