"""Framework adapters (``langchain``, ``llamaindex``, ``haystack``): thin pipeline objects.

Each class here wraps a framework object and exposes the python adapter's protocol,
``retrieve(question, k)`` and/or ``answer(question)``, returning the framework's own objects;
:mod:`gate.adapters.objects` converts those at the boundary. So a framework pipeline runs
wherever a python-adapter pipeline runs, with the same timeouts, threads and error handling.
The frameworks are optional extras, imported only here and only when such an adapter is built.

One call serves both halves of a case: a chain, query engine or Haystack pipeline produces
the documents it retrieved and the answer in one run, so ``retrieve`` and ``answer`` of the
same question share that run (:class:`OncePerCase`) instead of calling the pipeline twice.

Where ``k`` goes (``run.k``):

* LangChain retriever: a copy with ``search_kwargs["k"] = k`` (vector store retrievers) or
  ``k = k`` (``BM25Retriever``, most community retrievers). A chain's retriever keeps the ``k``
  it was built with: LangChain has no way to pass it through an arbitrary chain.
* LlamaIndex: an index gives ``as_retriever(similarity_top_k=k)`` and
  ``as_query_engine(similarity_top_k=k)``; a retriever or query engine whose retriever has
  ``similarity_top_k`` gets it set.
* Haystack: ``top_k`` of the component whose documents are read, when it takes that input.

Calls go through each library's synchronous API (``invoke``, ``query``/``retrieve``, ``run``)
on the python adapter's threads: the libraries' async paths call sync embedding and model code
on the event loop, which would serialise the cases.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from gate import requirement
from gate.adapters.objects import plain_answer
from gate.core.errors import UsageError
from gate.model.config import AdapterConfig


class OncePerCase:
    """``get(question)`` runs ``call(question)`` once for the ``consumers`` calls of one case.

    The first caller runs it; the others wait for its result (or its exception). The entry
    is dropped once every consumer has asked, so a later case with the same question runs
    the pipeline again.
    """

    def __init__(self, call: Callable[[str], Any], consumers: int = 2) -> None:
        self._call = call
        self._consumers = consumers
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[Future[Any], list[int]]] = {}

    def get(self, question: str) -> Any:
        with self._lock:
            entry = self._pending.get(question)
            owner = entry is None
            if entry is None:
                entry = (Future(), [0])
                self._pending[question] = entry
            future, asked = entry
            asked[0] += 1
            if asked[0] >= self._consumers:
                del self._pending[question]
        if owner:
            try:
                future.set_result(self._call(question))
            except BaseException as exc:  # handed to every consumer
                future.set_exception(exc)
        return future.result()


def _output(result: Any, key: str, what: str) -> Any:
    if not isinstance(result, dict):
        raise ValueError(f"{what}: the pipeline returned {type(result).__name__}, not a mapping with {key!r}")
    if key not in result:
        keys = ", ".join(sorted(map(str, result))) or "none"
        raise ValueError(f"{what}: output has no {key!r} (keys: {keys})")
    return result[key]


# --------------------------------------------------------------------------- LangChain


class LangChainPipeline:
    """A LangChain ``BaseRetriever`` (retrieve only) or Runnable chain (answer, and retrieve
    from the chain's documents unless ``documents_output`` is empty)."""

    def __init__(self, target: Any, adapter: AdapterConfig) -> None:
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.runnables import Runnable

        self._input_key = adapter.inputs[0] if adapter.inputs else _single_input_key(target)
        self._answer_key = adapter.answer_output or "answer"
        self._documents_key = "context" if adapter.documents_output is None else adapter.documents_output
        self._retrievers: dict[int, Any] = {}
        self._retriever: Any = None
        if isinstance(target, BaseRetriever):
            self._retriever = target
            self.answer = None  # type: ignore[assignment]  # a retriever does not answer
            return
        if not isinstance(target, Runnable):
            raise UsageError(
                f"adapter.target: expected a LangChain Runnable or BaseRetriever, got {type(target).__name__}"
            )
        self._chain = target
        self._shared = OncePerCase(self._invoke, consumers=2 if self._documents_key else 1)
        if not self._documents_key:
            self.retrieve = None  # type: ignore[assignment]  # an answer-only chain

    def _with_k(self, k: int) -> Any:
        retriever = self._retrievers.get(k)
        if retriever is None:
            base = self._retriever
            if isinstance(getattr(base, "search_kwargs", None), dict):
                retriever = base.model_copy(update={"search_kwargs": {**base.search_kwargs, "k": k}})
            elif isinstance(getattr(base, "k", None), int):
                retriever = base.model_copy(update={"k": k})
            else:
                retriever = base  # no k to set: it returns what it was built to return
            self._retrievers[k] = retriever
        return retriever

    def _invoke(self, question: str) -> Any:
        return self._chain.invoke({self._input_key: question} if self._input_key else question)

    def retrieve(self, question: str, k: int) -> Any:
        if self._retriever is not None:
            return self._with_k(k).invoke(question)
        return _output(self._shared.get(question), self._documents_key, "adapter.documents_output")

    def answer(self, question: str) -> Any:
        result = self._shared.get(question)
        if not isinstance(result, dict):
            return result  # a string or a message: the answer itself
        answer = _output(result, self._answer_key, "adapter.answer_output")
        if self._documents_key and self._documents_key in result:
            return {"text": _text(answer), "retrieved_chunks": list(result[self._documents_key])}
        return answer


def _single_input_key(runnable: Any) -> str | None:
    """The one key of a chain that takes a mapping (``{"input": ...}`` for create_retrieval_chain)."""
    try:
        schema = runnable.get_input_jsonschema()
    except Exception:  # a schema LangChain cannot build: pass the question itself
        return None
    properties = schema.get("properties") if schema.get("type") == "object" else None
    return next(iter(properties)) if isinstance(properties, dict) and len(properties) == 1 else None


def _text(answer: Any) -> Any:
    content = getattr(answer, "content", None)
    return content if isinstance(content, str) else answer


# --------------------------------------------------------------------------- LlamaIndex


class LlamaIndexPipeline:
    """A LlamaIndex index (retriever and query engine from it), query engine or retriever."""

    def __init__(self, target: Any, adapter: AdapterConfig, k: int) -> None:
        engine: Any = None
        retriever: Any = None
        if callable(getattr(target, "as_query_engine", None)) and callable(
            getattr(target, "as_retriever", None)
        ):
            engine = target.as_query_engine(similarity_top_k=k)
        elif callable(getattr(target, "query", None)):
            engine = target
            _set_top_k(getattr(engine, "retriever", None), k)
        elif callable(getattr(target, "retrieve", None)):
            retriever = copy.copy(target)
            _set_top_k(retriever, k)
        else:
            raise UsageError(
                "adapter.target: expected a LlamaIndex index, query engine or retriever, "
                f"got {type(target).__name__}"
            )
        self._retriever = retriever
        if engine is not None:
            self._shared = OncePerCase(engine.query)
        else:
            self.answer = None  # type: ignore[assignment]  # a retriever does not answer

    def retrieve(self, question: str, k: int) -> Any:
        if self._retriever is not None:
            return self._retriever.retrieve(question)
        return list(self._shared.get(question).source_nodes)

    def answer(self, question: str) -> Any:
        return self._shared.get(question)


def _set_top_k(retriever: Any, k: int) -> None:
    if retriever is not None and isinstance(getattr(retriever, "similarity_top_k", None), int):
        retriever.similarity_top_k = k


# --------------------------------------------------------------------------- Haystack


def _sockets(component: Any) -> dict[str, Any]:
    return dict(getattr(getattr(component, "__haystack_output__", None), "_sockets_dict", {}) or {})


def _locate(
    configured: str | None, socket: str, key: str, outputs: dict[str, dict[str, Any]]
) -> tuple[str, str] | None:
    """``(component, socket)`` named by ``configured``, else the one component with ``socket``."""
    if configured:
        component, name = _split(configured, key)
        if component not in outputs:
            known = ", ".join(sorted(outputs))
            raise UsageError(
                f"adapter.{key}: the pipeline has no component {component!r} (components: {known})"
            )
        return component, name
    found = sorted(n for n, sockets in outputs.items() if socket in sockets)
    if len(found) > 1:
        names = ", ".join(f"{n}.{socket}" for n in found)
        raise UsageError(f"adapter.{key}: several components give a {socket!r} output ({names}); name one")
    return (found[0], socket) if found else None


class HaystackPipeline:
    """A Haystack 2 ``Pipeline``: the question into its query inputs, documents and replies out.

    Defaults, from the pipeline's graph: the question goes to every unconnected input named
    ``query`` or ``question``; the documents are the ``documents`` output of the one component
    that has it; the answer is the first item of the ``replies`` of the one component that has
    it (a generator: strings or ``ChatMessage``), else of its ``answers`` (an ``ExtractiveReader``'s
    ``ExtractedAnswer``, highest score first, or an ``AnswerBuilder``'s ``GeneratedAnswer``).
    ``adapter.inputs`` / ``documents_output`` / ``answer_output`` (``component.socket``) choose.
    The answer's ``retrieved_chunks`` are the documents output when there is one, else the
    answer's own documents (:func:`gate.adapters.objects.plain_answer`).
    """

    def __init__(self, target: Any, adapter: AdapterConfig, k: int) -> None:
        if not callable(getattr(target, "run", None)) or not callable(getattr(target, "inputs", None)):
            raise UsageError(f"adapter.target: expected a Haystack Pipeline, got {type(target).__name__}")
        self._pipeline = target
        open_inputs: dict[str, dict[str, Any]] = target.inputs()
        if adapter.inputs:
            self._inputs = [tuple(_split(path, "inputs")) for path in adapter.inputs]
        else:
            self._inputs = [
                (name, socket)
                for name, sockets in open_inputs.items()
                for socket in sockets
                if socket in {"query", "question"}
            ]
            if not self._inputs:
                raise UsageError(
                    "adapter.inputs: the pipeline has no open 'query' or 'question' input; name them"
                )
        outputs = {name: _sockets(target.get_component(name)) for name in target.graph.nodes}
        self._documents = _locate(adapter.documents_output, "documents", "documents_output", outputs)
        self._replies = _locate(adapter.answer_output, "replies", "answer_output", outputs) or _locate(
            None, "answers", "answer_output", outputs
        )
        if self._documents is None and self._replies is None:
            raise UsageError(
                "adapter.target: the pipeline has no component with a 'documents', 'replies' or 'answers' "
                "output; name them with adapter.documents_output / adapter.answer_output"
            )
        if self._documents is None:
            self.retrieve = None  # type: ignore[assignment]  # an answer-only pipeline
        if self._replies is None:
            self.answer = None  # type: ignore[assignment]  # a retrieval-only pipeline
        documents_inputs = open_inputs.get(self._documents[0], {}) if self._documents else {}
        self._top_k = k if "top_k" in documents_inputs else None
        both = self._documents is not None and self._replies is not None
        self._shared = OncePerCase(self._run, consumers=2 if both else 1)

    def _run(self, question: str) -> dict[str, Any]:
        data: dict[str, dict[str, Any]] = {}
        for component, socket in self._inputs:
            data.setdefault(component, {})[socket] = question
        if self._top_k is not None and self._documents is not None:
            data.setdefault(self._documents[0], {})["top_k"] = self._top_k
        read = {path[0] for path in (self._documents, self._replies) if path is not None}
        return dict(self._pipeline.run(data, include_outputs_from=read))

    def _part(self, result: dict[str, Any], path: tuple[str, str], key: str) -> Any:
        return _output(_output(result, path[0], f"adapter.{key}"), path[1], f"adapter.{key}")

    def retrieve(self, question: str, k: int) -> Any:
        assert self._documents is not None
        return self._part(self._shared.get(question), self._documents, "documents_output")

    def answer(self, question: str) -> Any:
        assert self._replies is not None
        result = self._shared.get(question)
        replies = self._part(result, self._replies, "answer_output")
        if isinstance(replies, list | tuple):
            if not replies:
                raise ValueError(f"{'.'.join(self._replies)}: no reply")
            replies = replies[0]
        answer = plain_answer(replies)
        if self._documents is not None and isinstance(answer, dict):
            answer = {
                **answer,
                "retrieved_chunks": list(self._part(result, self._documents, "documents_output")),
            }
        return answer


def _split(path: str, key: str) -> tuple[str, str]:
    component, sep, socket = path.partition(".")
    if not sep or not component or not socket:
        raise UsageError(f"adapter.{key}: expected COMPONENT.SOCKET, got {path!r}")
    return component, socket


def framework_pipeline(kind: str, target: Any, adapter: AdapterConfig, k: int) -> Any:
    """The python-adapter pipeline object for a framework ``target`` (``kind``: langchain, llamaindex or haystack)."""
    try:
        if kind == "langchain":
            return LangChainPipeline(target, adapter)
        if kind == "llamaindex":
            return LlamaIndexPipeline(target, adapter, k)
        return HaystackPipeline(target, adapter, k)
    except ModuleNotFoundError as exc:
        raise UsageError(
            f"adapter.type {kind}: {exc.name} is not installed (pip install '{requirement(kind)}')"
        ) from None
