"""The adapter boundary: framework objects converted, empty texts and wrong shapes refused by name.

The objects are built from the real LangChain, LlamaIndex and Haystack packages (test extra).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from frameworks import require
from run_helpers import ragproof, write_config, write_dataset

from gate.adapters.base import AdapterError, parse_answer, parse_chunks
from gate.adapters.objects import text_id


def _lc_documents() -> list[object]:
    docs = require("langchain_core.documents")
    return [
        docs.Document(page_content="Refunds within 30 days.", metadata={"source": "doc-1"}, id="c1"),
        docs.Document(page_content="Shipping takes 2 days.", metadata={"source": "doc-2", "page": 3}),
    ]


def _llama_nodes() -> list[object]:
    schema = require("llama_index.core.schema")
    node = schema.TextNode(text="The warranty lasts 12 months.", id_="n1", metadata={"file_name": "w.md"})
    node.relationships[schema.NodeRelationship.SOURCE] = schema.RelatedNodeInfo(node_id="doc-3")
    return [schema.NodeWithScore(node=node, score=0.75), schema.TextNode(text="Orphan node.", id_="n2")]


def _haystack_documents() -> list[object]:
    haystack = require("haystack")
    return [
        haystack.Document(id="h1", content="Support is open 9 to 5.", meta={"source_id": "doc-4"}, score=1.5)
    ]


def _plain(chunks: list[object]) -> list[dict[str, object]]:
    return [c.model_dump(exclude_none=True) for c in parse_chunks(chunks)]


def test_langchain_documents_become_chunks_with_their_text_and_metadata() -> None:
    assert _plain(_lc_documents()) == [
        {"id": "c1", "text": "Refunds within 30 days.", "metadata": {"source": "doc-1"}},
        {
            "id": text_id("Shipping takes 2 days."),
            "text": "Shipping takes 2 days.",
            "metadata": {"source": "doc-2", "page": 3},
        },
    ]
    assert text_id("Shipping takes 2 days.") == "sha256:7e17b8715265d7bf"


def test_langchain_similarity_search_with_score_pairs_keep_the_score() -> None:
    doc = _lc_documents()[0]
    assert _plain([(doc, 0.25)]) == [
        {"id": "c1", "text": "Refunds within 30 days.", "score": 0.25, "metadata": {"source": "doc-1"}}
    ]


@pytest.mark.slow
def test_llamaindex_nodes_carry_ref_doc_id_as_document_id() -> None:
    assert _plain(_llama_nodes()) == [
        {
            "id": "n1",
            "text": "The warranty lasts 12 months.",
            "score": 0.75,
            "metadata": {"file_name": "w.md", "document_id": "doc-3"},
        },
        {"id": "n2", "text": "Orphan node.", "metadata": {}},
    ]


def test_haystack_documents_become_chunks() -> None:
    assert _plain(_haystack_documents()) == [
        {"id": "h1", "text": "Support is open 9 to 5.", "score": 1.5, "metadata": {"source_id": "doc-4"}}
    ]


def test_framework_objects_in_retrieved_chunks_and_framework_answers() -> None:
    answer = parse_answer({"text": "12 months.", "retrieved_chunks": _lc_documents() + _llama_nodes()})
    assert [c.id for c in answer.retrieved_chunks or []] == [
        "c1",
        text_id("Shipping takes 2 days."),
        "n1",
        "n2",
    ]

    response_mod = require("llama_index.core.base.response.schema")
    response = response_mod.Response(response="It lasts 12 months.", source_nodes=_llama_nodes()[:1])
    parsed = parse_answer(response)
    assert parsed.text == "It lasts 12 months."
    assert [(c.id, c.metadata["document_id"]) for c in parsed.retrieved_chunks or []] == [("n1", "doc-3")]

    messages = require("langchain_core.messages")
    assert parse_answer(messages.AIMessage(content="Within 30 days.")).model_dump(exclude_none=True) == {
        "text": "Within 30 days."
    }

    dataclasses = require("haystack.dataclasses")
    assert parse_answer(dataclasses.ChatMessage.from_assistant("9 to 5.")).text == "9 to 5."
    generated = dataclasses.GeneratedAnswer(
        data="9 to 5.", query="q", documents=_haystack_documents(), meta={}
    )
    parsed = parse_answer(generated)
    assert (parsed.text, [c.id for c in parsed.retrieved_chunks or []]) == ("9 to 5.", ["h1"])


def test_an_empty_text_is_an_adapter_error() -> None:
    docs = require("langchain_core.documents")
    with pytest.raises(AdapterError) as info:
        parse_chunks([docs.Document(page_content=" ", metadata={}, id="c9")])
    assert str(info.value) == (
        "retrieve result chunk #1: text: expected a non-empty string (received langchain_core Document)"
    )
    with pytest.raises(AdapterError) as info:
        parse_answer({"text": "a", "retrieved_chunks": [{"id": "x"}]})
    assert str(info.value) == (
        "answer result retrieved_chunks chunk #1: text: expected a non-empty string "
        "(received an object with keys id)"
    )


def test_wrong_shapes_name_the_type_received_and_what_was_expected() -> None:
    with pytest.raises(AdapterError) as info:
        parse_chunks(["just a string"])
    assert str(info.value) == (
        "retrieve result chunk #1: got str; expected a chunk {id, text, score?, metadata?}, "
        "a LangChain Document, a LlamaIndex NodeWithScore/TextNode or a Haystack Document"
    )
    with pytest.raises(AdapterError) as info:
        parse_chunks("a string")
    assert str(info.value) == 'retrieve returned str; expected a list of chunks or {"chunks": [...]}'
    with pytest.raises(AdapterError) as info:
        parse_chunks([{"text": "no id", "page": 1}])
    assert (
        str(info.value)
        == "retrieve result chunk #1: id: Field required (received an object with keys page, text)"
    )
    with pytest.raises(AdapterError) as info:
        parse_answer(42)
    assert str(info.value) == (
        "answer returned int; expected a string, {text, citations?, retrieved_chunks?}, a LlamaIndex "
        "Response, a LangChain message or a Haystack ChatMessage/GeneratedAnswer/ExtractedAnswer"
    )


LC_PIPELINE = """
from langchain_core.documents import Document

CORPUS = {
    "refunds": ("doc-1", "Refunds are accepted within 30 days."),
    "shipping": ("doc-2", "Orders ship within 2 business days."),
    "warranty": ("doc-3", "The warranty lasts 12 months."),
    "support": ("doc-4", "Support is open 9 to 5 on weekdays."),
}


class Pipeline:
    def retrieve(self, question, k):
        hits = [(doc, text) for topic, (doc, text) in CORPUS.items() if topic in question]
        return [Document(page_content=text, metadata={"source": doc}, id=f"{doc}#0") for doc, text in hits]

    def answer(self, question):
        return "I don't know."
"""


def _run(directory: Path, answers: bool = True, **run: object) -> tuple[int, str, dict[str, object], str]:
    directory.mkdir(exist_ok=True)
    (directory / "lc_pipeline.py").write_text(LC_PIPELINE, encoding="utf-8")
    topics = [("refunds", "doc-1"), ("shipping", "doc-2"), ("warranty", "doc-3")]
    cases = [
        {"id": f"c{i}", "question": f"tell me about {topic}", "expected_source_ids": [doc]}
        | ({"expected_answer": "I don't know."} if answers else {})
        for i, (topic, doc) in enumerate(topics)
    ]
    write_dataset(directory, cases)
    write_config(directory, {"type": "python", "target": "lc_pipeline:Pipeline"}, run=dict(run))
    done = ragproof("run", "-c", "ragproof.yaml", "--out", "out", "--no-progress", cwd=directory)
    assert done.returncode == 0, done.stderr
    meta = json.loads((directory / "out" / "run.json").read_text(encoding="utf-8"))
    report = ragproof("report", "out", cwd=directory)
    assert report.returncode == 0, report.stderr
    return done.returncode, done.stderr, meta, report.stdout


NO_MATCH = (
    "no retrieved chunk matched any expected source id on 3 case(s) with source_match chunk: "
    "retrieved ids look like 'doc-1#0', expected ids like 'doc-1'; metadata keys seen: source; "
    "set run.source_match: document and run.document_id_key to the metadata key that holds the "
    "dataset's ids"
)
SHORT = (
    "retrieve returned fewer than k=3 chunks on 3 of 3 case(s) (median 1): @k metrics count the "
    "missing ranks as misses; lower run.k or raise the retriever's own k"
)


@pytest.mark.slow
def test_source_ids_under_a_framework_key_warn_until_document_id_key_names_it(tmp_path: Path) -> None:
    _, stderr, meta, report = _run(tmp_path / "a")
    assert meta["warnings"] == [NO_MATCH, SHORT]
    assert f"ragproof: warning: {NO_MATCH}\n" in stderr and f"ragproof: warning: {SHORT}\n" in stderr
    assert f"warning: {NO_MATCH}\n" in report and f"warning: {SHORT}\n" in report
    html = ragproof("report", "out", "--html", "r.html", cwd=tmp_path / "a")
    assert html.returncode == 0, html.stderr
    assert (
        "⚠ retrieve returned fewer than k=3 chunks on 3 of 3 case(s)"
        in (tmp_path / "a" / "r.html").read_text()
    )

    _, stderr, meta, _ = _run(tmp_path / "b", k=1, source_match="document", document_id_key="source")
    assert (meta["warnings"], meta["document_id_key"], "warning" in stderr) == ([], "source", False)
    rows = [json.loads(line) for line in (tmp_path / "b" / "out" / "rows.jsonl").read_text().splitlines()]
    assert [r["metrics"]["retrieval.recall_at_k"]["value"] for r in rows] == [1.0, 1.0, 1.0]
    assert rows[0]["retrieved"] == [
        {
            "id": "doc-1#0",
            "text": "Refunds are accepted within 30 days.",
            "score": None,
            "metadata": {"source": "doc-1"},
        }
    ]


@pytest.mark.slow
def test_a_dataset_without_expected_answer_warns_that_answer_quality_is_unmeasured(tmp_path: Path) -> None:
    _, stderr, meta, _ = _run(tmp_path, answers=False, k=1, source_match="document", document_id_key="source")
    warning = (
        "every answer metric (answer.exact_match, answer.token_f1, answer.numeric_match, "
        "generation.completeness, judge.context_recall) was skipped: no case has expected_answer (3 case(s) answered), so answer quality is not measured; "
        "add expected_answer to the dataset"
    )
    assert meta["warnings"] == [warning]
    assert f"ragproof: warning: {warning}\n" in stderr


def test_replayed_chunks_pass_the_same_boundary(tmp_path: Path) -> None:
    import asyncio

    from gate.adapters.replay import ReplayAdapter, load_replay
    from gate.model.dataset import Case

    path = tmp_path / "recorded.jsonl"
    path.write_text(
        json.dumps({"id": "c1", "retrieved": [{"id": "x", "text": ""}]})
        + "\n"
        + json.dumps({"id": "c2", "answer": {"text": "a", "retrieved_chunks": [{"id": "y", "text": "ok"}]}})
        + "\n",
        encoding="utf-8",
    )
    adapter = ReplayAdapter(load_replay(path))
    with pytest.raises(AdapterError) as info:
        asyncio.run(adapter.run_case(Case(id="c1", question="q"), 3))
    assert str(info.value) == (
        "recorded retrieved chunk #1: text: expected a non-empty string (received gate Chunk)"
    )
    output = asyncio.run(adapter.run_case(Case(id="c2", question="q"), 3))
    assert output.answer is not None
    assert [c.id for c in output.answer.retrieved_chunks or []] == ["y"]


RETRIEVAL_ONLY = """
class Pipeline:
    def retrieve(self, question, k):
        return [{"id": "doc-1", "text": "Refunds are accepted within 30 days."}]
"""


@pytest.mark.slow
def test_a_retrieval_only_pipeline_gets_no_answer_warning(tmp_path: Path) -> None:
    (tmp_path / "ro.py").write_text(RETRIEVAL_ONLY, encoding="utf-8")
    write_dataset(tmp_path, [{"id": "c1", "question": "refunds?", "expected_source_ids": ["doc-1"]}])
    write_config(tmp_path, {"type": "python", "target": "ro:Pipeline"}, run={"k": 1})
    done = ragproof("run", "-c", "ragproof.yaml", "--out", "out", "--no-progress", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads((tmp_path / "out" / "run.json").read_text())["warnings"] == []
