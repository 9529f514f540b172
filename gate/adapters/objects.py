"""Framework objects at the adapter boundary, recognised by their attributes.

A pipeline built on LangChain, LlamaIndex or Haystack returns that framework's own objects.
They are converted here into the plain shapes of :mod:`gate.records` without importing any
framework (ragproof does not depend on them), so the same code serves ``retrieve()`` results,
an answer's ``retrieved_chunks`` and the framework adapters.

Chunks (each row: how the object is recognised → chunk fields):

==========================  ==========================================  ===========================================
object                      recognised by                               chunk
==========================  ==========================================  ===========================================
LlamaIndex ``NodeWithScore``  ``node`` (a node, below) and ``score``       the node's chunk, ``score`` from the pair
LlamaIndex ``TextNode``     ``node_id`` and a ``text`` string            ``id`` = node_id, ``text``, ``metadata``;
                                                                        ``ref_doc_id`` → ``metadata.document_id``
LangChain ``Document``      a ``page_content`` string and ``metadata``   ``id`` = ``Document.id``, ``text`` =
                                                                        page_content, ``metadata``
Haystack ``Document``       ``content``, ``meta`` and ``id``             ``id``, ``text`` = content, ``score``,
                                                                        ``metadata`` = meta
``(object, number)``        a pair, as ``similarity_search_with_score``  the object's chunk with that ``score``
==========================  ==========================================  ===========================================

A LangChain ``Document`` without an id gets ``sha256:`` and the first 16 hex digits of the
sha256 of its text: stable across runs, so chunk matching still works when the same text comes
back, and visibly not a source id of the dataset. ``document_id`` already present in the
metadata is never overwritten.

Answers: a string; LlamaIndex ``Response`` (``response`` text and ``source_nodes`` →
``retrieved_chunks``); a LangChain message (a ``content`` string and a ``type``); a Haystack
``ChatMessage`` (``role`` and a ``text`` string), ``GeneratedAnswer`` (``data``, ``query``,
``documents`` → ``retrieved_chunks``) or ``ExtractedAnswer`` (``data``, ``query``, ``document``,
``document_offset``: the span's text, its document as the one retrieved chunk and as the
citation). An ``ExtractedAnswer`` whose ``data`` is None is the reader's "no answer" (the
question is not answered by the documents): its text is empty, which the metrics read as an
abstention.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

# What the boundary accepts, for error messages.
CHUNK_SHAPES = (
    "a chunk {id, text, score?, metadata?}, a LangChain Document, "
    "a LlamaIndex NodeWithScore/TextNode or a Haystack Document"
)
ANSWER_SHAPES = (
    "a string, {text, citations?, retrieved_chunks?}, a LlamaIndex Response, "
    "a LangChain message or a Haystack ChatMessage/GeneratedAnswer/ExtractedAnswer"
)


def _metadata(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _with_document_id(metadata: dict[str, Any], document_id: Any) -> dict[str, Any]:
    if document_id not in (None, "") and metadata.get("document_id") in (None, ""):
        metadata["document_id"] = str(document_id)
    return metadata


def _is_node(obj: Any) -> bool:
    return isinstance(getattr(obj, "node_id", None), str) and isinstance(getattr(obj, "text", None), str)


def _node_chunk(node: Any, score: Any) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": node.node_id,
        "text": node.text,
        "metadata": _with_document_id(
            _metadata(getattr(node, "metadata", None)), getattr(node, "ref_doc_id", None)
        ),
    }
    if score is not None:
        chunk["score"] = score
    return chunk


def text_id(text: str) -> str:
    """``sha256:`` + the first 16 hex digits of the sha256 of ``text`` (an id for id-less chunks)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def framework_chunk(obj: Any) -> dict[str, Any] | None:
    """The chunk dict for a framework object, or None when ``obj`` is not one."""
    if (
        isinstance(obj, tuple)
        and len(obj) == 2
        and isinstance(obj[1], int | float)
        and not isinstance(obj[1], bool)
    ):
        inner = framework_chunk(obj[0])
        if inner is not None:
            inner["score"] = float(obj[1])
        return inner
    if isinstance(obj, Mapping | str | bytes) or obj is None:
        return None
    node = getattr(obj, "node", None)
    if node is not None and _is_node(node) and hasattr(obj, "score"):
        return _node_chunk(node, obj.score)
    if _is_node(obj) and not hasattr(obj, "page_content"):
        return _node_chunk(obj, None)
    content = getattr(obj, "page_content", None)
    if isinstance(content, str) and hasattr(obj, "metadata"):
        doc_id = getattr(obj, "id", None)
        return {
            "id": doc_id if isinstance(doc_id, str) and doc_id else text_id(content),
            "text": content,
            "metadata": _metadata(obj.metadata),
        }
    if hasattr(obj, "content") and hasattr(obj, "meta") and isinstance(getattr(obj, "id", None), str):
        chunk = {"id": obj.id, "text": obj.content, "metadata": _metadata(obj.meta)}
        score = getattr(obj, "score", None)
        if score is not None:
            chunk["score"] = score
        return chunk
    return None


def plain_chunk(obj: Any) -> Any:
    """A chunk as plain data: a framework object converted, a pydantic model dumped, else as is."""
    converted = framework_chunk(obj)
    if converted is not None:
        return converted
    if isinstance(obj, BaseModel):
        return obj.model_dump()
    return obj


def plain_answer(obj: Any) -> Any:
    """An answer as plain data (``{text, ...}``) when ``obj`` is a known shape, else ``obj`` itself."""
    if isinstance(obj, str):
        return {"text": obj}
    if isinstance(obj, Mapping):
        return obj
    response = getattr(obj, "response", None)
    if hasattr(obj, "source_nodes") and (response is None or isinstance(response, str)):
        # LlamaIndex Response; a None response (no answer synthesised) stays None: the
        # answer model then names the missing text.
        return {"text": response, "retrieved_chunks": list(obj.source_nodes or [])}
    content = getattr(obj, "content", None)
    if isinstance(content, str) and isinstance(getattr(obj, "type", None), str):
        return {"text": content}  # LangChain message (AIMessage)
    if hasattr(obj, "role") and isinstance(getattr(obj, "text", None), str):
        return {"text": obj.text}  # Haystack ChatMessage
    if hasattr(obj, "query") and hasattr(obj, "documents") and isinstance(getattr(obj, "data", None), str):
        return {"text": obj.data, "retrieved_chunks": list(obj.documents or [])}  # Haystack GeneratedAnswer
    if (
        hasattr(obj, "query")
        and hasattr(obj, "document_offset")
        and isinstance(getattr(obj, "data", ""), str | None)
    ):
        # Haystack ExtractedAnswer: a span of one document; data None is the reader's "no answer"
        document = getattr(obj, "document", None)
        extracted: dict[str, Any] = {"text": obj.data or ""}
        if document is not None:
            extracted["retrieved_chunks"] = [document]
            if isinstance(getattr(document, "id", None), str):
                extracted["citations"] = [document.id]
        return extracted
    if isinstance(obj, BaseModel):
        return obj.model_dump()
    return obj


def describe(obj: Any) -> str:
    """The type of ``obj`` for an error message: its class, and a mapping's keys."""
    if isinstance(obj, Mapping):
        keys = ", ".join(sorted(str(k) for k in obj)[:8]) or "no keys"
        return f"an object with keys {keys}"
    kind = type(obj)
    module = kind.__module__.split(".")[0]
    return kind.__name__ if module == "builtins" else f"{module} {kind.__name__}"
