"""The langchain, llamaindex and haystack adapters against the real libraries (test extra).

Each example under examples/ runs through ``ragproof run`` with its config alone, and its
scores equal those of the same pipeline wrapped by hand for the python adapter.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from frameworks import require
from run_helpers import PIPELINES, ragproof

from gate.adapters.base import Adapter

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FRAMEWORKS = {
    "langchain": ("langchain_community.retrievers", "LangChain"),
    "llamaindex": ("llama_index.core", "LlamaIndex"),
    "haystack": ("haystack", "Haystack"),
}


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "rows.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_framework_example_equals_the_pipeline_wrapped_by_hand(framework: str, tmp_path: Path) -> None:
    module, by_hand = FRAMEWORKS[framework]
    require(module)
    example = EXAMPLES / framework
    env = {**os.environ, "FRAMEWORK_EXAMPLE": str(example)}
    config = yaml.safe_load((example / "ragproof.yaml").read_text(encoding="utf-8"))
    assert config["adapter"]["type"] == framework
    store = ["--out", str(tmp_path / "framework"), "--no-progress"]
    done = ragproof("run", "-c", str(example / "ragproof.yaml"), *store, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr

    shutil.copy(PIPELINES / "by_hand.py", tmp_path / "by_hand.py")
    config["dataset"] = str(example / config["dataset"])
    config["adapter"] = {"type": "python", "target": f"by_hand:{by_hand}", "concurrency": 4, "timeout_s": 30}
    config["run"].pop("document_id_key", None)  # the wrapper writes metadata.document_id itself
    (tmp_path / "ragproof.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = ragproof(
        "run", "-c", "ragproof.yaml", "--out", "hand", "--no-progress", cwd=tmp_path, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr

    framework_rows, hand_rows = _rows(tmp_path / "framework"), _rows(tmp_path / "hand")
    assert len(framework_rows) == 127
    assert [r["status"] for r in framework_rows] == ["ok"] * 127
    assert [(r["case_id"], r["metrics"]) for r in framework_rows] == [
        (r["case_id"], r["metrics"]) for r in hand_rows
    ]
    # Same chunks, in the same order; only where the document id sits differs.
    assert [[c["id"] for c in r["retrieved"]] for r in framework_rows] == [
        [c["id"] for c in r["retrieved"]] for r in hand_rows
    ]
    summary = json.loads((tmp_path / "framework" / "summary.json").read_text(encoding="utf-8"))
    assert summary == json.loads((tmp_path / "hand" / "summary.json").read_text(encoding="utf-8"))
    recall = summary["slices"]["all"]["retrieval.recall_at_k"]
    assert recall["scored"] == 95 and recall["mean"] > 0.7


FIXTURES = """
from langchain_classic.chains import create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_community.retrievers import BM25Retriever

DOCS = [Document(page_content=f"text number {i}", metadata={"source": f"d{i}"}, id=f"c{i}") for i in range(6)]
store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
store.add_documents(DOCS)
vector_retriever = store.as_retriever(search_kwargs={"k": 2})
bm25 = BM25Retriever.from_documents(DOCS, k=1)
prompt = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{input}")])
retrieval_chain = create_retrieval_chain(
    vector_retriever, create_stuff_documents_chain(FakeListChatModel(responses=["It is 42."]), prompt)
)
answer_only = RunnableLambda(lambda q: "echo: " + q)
odd_output = RunnableLambda(lambda q: {"reply": q})
"""


def _adapter(tmp_path: Path, **adapter: object) -> Adapter:
    from gate.adapters import build_adapter
    from gate.core.environment import Environment
    from gate.model.config import parse_config

    (tmp_path / "lc_fixtures.py").write_text(FIXTURES, encoding="utf-8")
    config = parse_config(
        {"dataset": "cases.jsonl", "adapter": adapter, "run": {"k": 3}}, tmp_path / "ragproof.yaml"
    )
    return build_adapter(config, Environment(variables={}, cwd=tmp_path), tmp_path / "logs")


def test_langchain_retrievers_get_run_k_and_chains_their_input_key(tmp_path: Path) -> None:
    from run_helpers import run_one_case

    require("langchain_classic.chains")
    vector = run_one_case(_adapter(tmp_path, type="langchain", target="lc_fixtures:vector_retriever"), "q", 3)
    assert (vector.supports_retrieve, vector.supports_answer, len(vector.retrieved or [])) == (True, False, 3)
    bm25 = run_one_case(_adapter(tmp_path, type="langchain", target="lc_fixtures:bm25"), "text number 4", 3)
    assert [c.id for c in bm25.retrieved or []][:1] == ["c4"] and len(bm25.retrieved or []) == 3

    chain = run_one_case(_adapter(tmp_path, type="langchain", target="lc_fixtures:retrieval_chain"), "q", 3)
    assert chain.answer is not None and chain.answer.text == "It is 42."
    # create_retrieval_chain's retriever keeps the k it was built with (2): documented
    assert [c.id for c in chain.retrieved or []] == [c.id for c in chain.answer.retrieved_chunks or []]
    assert len(chain.retrieved or []) == 2

    plain = _adapter(tmp_path, type="langchain", target="lc_fixtures:answer_only", documents_output="")
    out = run_one_case(plain, "hi", 3)
    assert (out.supports_retrieve, out.answer.text if out.answer else None) == (False, "echo: hi")


def test_framework_adapter_mistakes_are_named(tmp_path: Path) -> None:
    from run_helpers import run_one_case

    from gate.adapters.base import AdapterError
    from gate.core.errors import UsageError

    require("langchain_classic.chains")
    with pytest.raises(AdapterError) as info:
        run_one_case(_adapter(tmp_path, type="langchain", target="lc_fixtures:odd_output"), "q", 3)
    assert (
        str(info.value)
        == "retrieve raised ValueError: adapter.documents_output: output has no 'context' (keys: reply)"
    )
    # The target is loaded in the worker process: a wrong one is a usage error when it starts.
    with pytest.raises(UsageError) as usage:
        run_one_case(_adapter(tmp_path, type="langchain", target="lc_fixtures:DOCS"), "q", 3)
    assert str(usage.value) == "adapter.target: expected a LangChain Runnable or BaseRetriever, got list"
    with pytest.raises(UsageError) as usage:
        run_one_case(_adapter(tmp_path, type="haystack", target="lc_fixtures:bm25"), "q", 3)
    assert str(usage.value) == "adapter.target: expected a Haystack Pipeline, got BM25Retriever"


LLAMA_FIXTURES = """
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding

index = VectorStoreIndex.from_documents(
    [Document(text=f"page {i}", doc_id=f"d{i}") for i in range(6)], embed_model=MockEmbedding(embed_dim=8)
)
retriever = index.as_retriever(similarity_top_k=1)
"""

HAYSTACK_FIXTURES = """
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.components.joiners import DocumentJoiner
from haystack.document_stores.in_memory import InMemoryDocumentStore

store = InMemoryDocumentStore()
store.write_documents([Document(id=f"h{i}", content=f"page {i}", meta={"source_id": f"d{i}"}) for i in range(6)])
two = Pipeline()
two.add_component("first", InMemoryBM25Retriever(document_store=store))
two.add_component("second", InMemoryBM25Retriever(document_store=store))
"""


def _served_methods(adapter: Adapter) -> tuple[bool, bool]:
    """What the pipeline serves, as its worker process reports when it starts."""

    async def started() -> tuple[bool, bool]:
        await adapter.start()
        try:
            return adapter.supports_retrieve, adapter.supports_answer
        finally:
            await adapter.close()

    return asyncio.run(started())


def test_llamaindex_retrievers_get_run_k_and_haystack_ambiguity_is_named(tmp_path: Path) -> None:
    from run_helpers import run_one_case

    from gate.core.errors import UsageError

    require("llama_index.core")
    require("haystack")
    (tmp_path / "li_fixtures.py").write_text(LLAMA_FIXTURES, encoding="utf-8")
    (tmp_path / "hs_fixtures.py").write_text(HAYSTACK_FIXTURES, encoding="utf-8")
    out = run_one_case(_adapter(tmp_path, type="llamaindex", target="li_fixtures:retriever"), "page", 3)
    assert (out.supports_answer, len(out.retrieved or [])) == (False, 3)
    assert {c.metadata["document_id"] for c in out.retrieved or []} <= {f"d{i}" for i in range(6)}
    with pytest.raises(UsageError) as usage:
        run_one_case(_adapter(tmp_path, type="haystack", target="hs_fixtures:two"), "q", 3)
    assert str(usage.value) == (
        "adapter.documents_output: several components give a 'documents' output (first.documents, "
        "second.documents); name one"
    )
    with pytest.raises(UsageError) as usage:
        adapter = _adapter(
            tmp_path,
            type="haystack",
            target="hs_fixtures:two",
            documents_output="first.documents",
            answer_output="llm.replies",
        )
        run_one_case(adapter, "q", 3)
    assert (
        str(usage.value)
        == "adapter.answer_output: the pipeline has no component 'llm' (components: first, second)"
    )
    second = _adapter(
        tmp_path, type="haystack", target="hs_fixtures:two", documents_output="second.documents"
    )
    assert _served_methods(second) == (True, False)


def test_validate_builds_the_framework_pipeline(tmp_path: Path) -> None:
    require("haystack")
    (tmp_path / "hs_fixtures.py").write_text(HAYSTACK_FIXTURES, encoding="utf-8")
    (tmp_path / "cases.jsonl").write_text('{"id": "c1", "question": "page?"}\n', encoding="utf-8")
    config: dict[str, Any] = {
        "dataset": "cases.jsonl",
        "adapter": {"type": "haystack", "target": "hs_fixtures:two"},
    }
    (tmp_path / "ragproof.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = ragproof("validate", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        64,
        "ragproof: error: adapter.documents_output: several components give a 'documents' output "
        "(first.documents, second.documents); name one\n",
    )
    config["adapter"]["documents_output"] = "second.documents"
    (tmp_path / "ragproof.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = ragproof("validate", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ", adapter haystack (retrieve), " in done.stdout


EXTRACTIVE_FIXTURES = """
from haystack import Document, Pipeline, component
from haystack.components.builders import AnswerBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ExtractedAnswer
from haystack.document_stores.in_memory import InMemoryDocumentStore

store = InMemoryDocumentStore(bm25_algorithm="BM25Okapi")  # ranks every document
store.write_documents(
    [
        Document(id="h-tea", content="Green tea steeps for three minutes.", meta={"source": "tea"}),
        Document(id="h-rice", content="Rice cooks in twelve minutes.", meta={"source": "rice"}),
        Document(id="h-pasta", content="Pasta boils in ten minutes.", meta={"source": "pasta"}),
        Document(id="h-eggs", content="Eggs harden in nine minutes.", meta={"source": "eggs"}),
        Document(id="h-bread", content="Bread bakes for forty minutes.", meta={"source": "bread"}),
    ]
)


@component
class SpanReader:
    # The ExtractiveReader's output shape (its model weights are not needed to test the shape):
    # answers highest score first, the reader's "no answer" (data None) among them.
    def __init__(self, abstain: bool = False):
        self.abstain = abstain

    @component.output_types(answers=list[ExtractedAnswer])
    def run(self, query: str, documents: list[Document]):
        best = documents[0]
        start = best.content.index(" for ") + 5 if " for " in best.content else best.content.index(" in ") + 4
        span = best.content[start:].rstrip(".")
        found = ExtractedAnswer(
            query=query, score=0.4 if self.abstain else 0.9, data=span, document=best,
            document_offset=ExtractedAnswer.Span(start, start + len(span)),
        )
        nothing = ExtractedAnswer(query=query, score=0.6 if self.abstain else 0.1, data=None, document=None)
        return {"answers": [nothing, found] if self.abstain else [found, nothing]}


@component
class Replies:
    @component.output_types(replies=list[str])
    def run(self, documents: list[Document]):
        return {"replies": ["About " + documents[0].content.split(" for ")[-1]]}


def extractive(abstain=False):
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store))
    pipeline.add_component("answerer", SpanReader(abstain))
    pipeline.connect("retriever.documents", "answerer.documents")
    return pipeline


reader = extractive()
abstaining = extractive(abstain=True)
generative = Pipeline()
generative.add_component("retriever", InMemoryBM25Retriever(document_store=store))
generative.add_component("llm", Replies())
generative.add_component("builder", AnswerBuilder())
generative.connect("retriever.documents", "llm.documents")
generative.connect("retriever.documents", "builder.documents")
generative.connect("llm.replies", "builder.replies")
"""


def test_haystack_extracted_and_generated_answers_are_read_with_their_documents(tmp_path: Path) -> None:
    from run_helpers import run_one_case

    require("haystack")
    (tmp_path / "hx_fixtures.py").write_text(EXTRACTIVE_FIXTURES, encoding="utf-8")
    question = "How long does green tea steep?"
    for named in ({}, {"answer_output": "answerer.answers"}):  # found in the graph, or named
        out = run_one_case(
            _adapter(tmp_path, type="haystack", target="hx_fixtures:reader", **named), question, 2
        )
        assert (out.supports_retrieve, out.supports_answer) == (True, True)
        assert out.answer is not None
        assert (out.answer.text, out.answer.citations) == ("three minutes", ["h-tea"])
        # the context the reader saw: the retriever's documents, best first
        assert [c.id for c in out.answer.retrieved_chunks or []] == [c.id for c in out.retrieved or []]
        assert [c.id for c in out.retrieved or []][:1] == ["h-tea"] and len(out.retrieved or []) == 3  # run.k
    # the reader's "no answer" ranked first: an empty text, which the metrics read as an abstention
    out = run_one_case(_adapter(tmp_path, type="haystack", target="hx_fixtures:abstaining"), question, 2)
    assert out.answer is not None and (out.answer.text, out.answer.citations) == ("", None)
    generated = _adapter(
        tmp_path, type="haystack", target="hx_fixtures:generative", answer_output="builder.answers"
    )
    out = run_one_case(generated, question, 2)
    assert out.answer is not None and out.answer.text == "About three minutes."
    assert [c.id for c in out.answer.retrieved_chunks or []][:1] == ["h-tea"]


def test_validate_and_run_score_an_extractive_haystack_pipeline(tmp_path: Path) -> None:
    require("haystack")
    (tmp_path / "hx_fixtures.py").write_text(EXTRACTIVE_FIXTURES, encoding="utf-8")
    cases = [
        {"id": "tea", "question": "How long does green tea steep?", "expected_source_ids": ["tea"],
         "expected_answer": "three minutes"},
        {"id": "rice", "question": "How long does rice cook?", "expected_source_ids": ["rice"],
         "expected_answer": "twelve minutes"},
    ]  # fmt: skip
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    config = {
        "dataset": "cases.jsonl",
        "adapter": {"type": "haystack", "target": "hx_fixtures:reader"},
        "run": {"k": 2, "source_match": "document", "document_id_key": "source"},
    }
    (tmp_path / "ragproof.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = ragproof("validate", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ", adapter haystack (retrieve and answer), " in done.stdout
    done = ragproof("run", "--no-progress", "--out", "out", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = _rows(tmp_path / "out")
    assert [(r["status"], r["answer"]["text"]) for r in rows] == [
        ("ok", "three minutes"),
        ("ok", "twelve minutes"),
    ]
    assert [r["metrics"]["answer.exact_match"]["value"] for r in rows] == [1.0, 1.0]


@pytest.mark.parametrize("kind", ["langchain", "llamaindex", "haystack"])
def test_a_missing_framework_names_this_projects_install_line(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from gate.adapters import FRAMEWORK_PACKAGES, check_adapter
    from gate.core.environment import Environment
    from gate.core.errors import UsageError
    from gate.model.config import parse_config

    config = parse_config(
        {"dataset": "cases.jsonl", "adapter": {"type": kind, "target": "pipeline:x"}},
        tmp_path / "ragproof.yaml",
    )
    # the framework's package where none is installed: nowhere on the path
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "-packages" not in p])
    with pytest.raises(UsageError) as info:
        check_adapter(config, Environment(variables={}, cwd=tmp_path), ["c1"])
    assert str(info.value) == (
        f"adapter.type {kind}: {FRAMEWORK_PACKAGES[kind]} is not installed (pip install 'ragproof-gate[{kind}]')"
    )
