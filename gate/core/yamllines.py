"""Lines of a YAML document for error locations: a pydantic ``loc`` -> the line that holds it.

``yaml.safe_load`` returns plain dicts and lists without positions, so a validation error
could only name the dotted field. :meth:`YamlLines.load` keeps PyYAML's node graph (whose marks
carry positions) of the one parse the data is built from, and :meth:`YamlLines.line_of` walks it
along the error location: mapping keys by
their scalar value, sequence items by index. The line named is the one of the deepest node
found: the key itself for an unknown or wrongly-typed key, the enclosing key for a missing one
(``adapter.target`` absent -> the ``adapter:`` line). Lines are 1-based.

The document may come from a pull request, parsed before the trusted policy is known, so the
parse is bounded (:class:`BoundedLoader`): nesting deeper than :data:`MAX_DEPTH` levels, more
than :data:`MAX_ALIASES` aliases, or a node graph that would expand to more than
:data:`MAX_NODES` nodes once aliases are followed (an alias bomb: nine levels of nine
references each make 387 million) is a ``yaml.YAMLError`` naming the line, raised before
anything is constructed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

# Bounds of one document (a dataset of 200,000 cases holds a few million nodes, no aliases).
MAX_DEPTH = 100
MAX_ALIASES = 10_000
MAX_NODES = 20_000_000


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with a depth limit, an alias budget and an expanded-size budget."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_ALIASES:,} aliases", event.start_mark
                )
        elif self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent) and self._depth >= MAX_DEPTH:
            event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def expanded_size(root: yaml.Node, limit: int = MAX_NODES) -> int:
    """Nodes of the graph under ``root`` counted as construction would visit them (a node
    reached through k aliases counts k times); ComposerError once past ``limit``, or for a node
    that contains itself (a recursive alias).

    Memoised per node, so the count costs one visit per distinct node.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # post-order without recursion
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > limit:
                raise yaml.composer.ComposerError(
                    None, None, f"expands to more than {limit:,} nodes (aliases followed)", node.start_mark
                )
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise yaml.composer.ComposerError(None, None, "a recursive alias", node.start_mark)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class YamlLines:
    """Line lookup over one YAML document (the first, as ``safe_load`` reads)."""

    def __init__(self, root: yaml.Node | None) -> None:
        self._root = root

    @classmethod
    def load(cls, text: str) -> tuple[Any, YamlLines]:
        """``yaml.safe_load(text)`` and its lines from one parse (what ``safe_load`` does
        inside: compose the node graph, then construct the data from it). Raises YAMLError."""
        loader = BoundedLoader(text)
        try:
            root = loader.get_single_node()
            if root is not None:
                expanded_size(root)
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
