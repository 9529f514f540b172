"""A Haystack 2 RAG pipeline over the Quillstack handbook: BM25 retrieval, a prompt, a generator.

Written the way Haystack users write one: ``InMemoryDocumentStore`` +
``InMemoryBM25Retriever`` -> ``PromptBuilder`` -> a generator component. The generator is a
deterministic stand-in of this example's own (it answers with the prompt's context sentence
sharing the most words with the question), so the example runs offline and gives the same
answers every time; swap in ``OpenAIGenerator()`` and nothing else changes.

ragproof runs it with ``adapter: {type: haystack, target: pipeline:rag}`` (see ragproof.yaml):
the question goes to the open ``query`` and ``question`` inputs, ``run.k`` to the retriever's
``top_k``, and the retriever's ``documents`` and the generator's ``replies`` come back.
"""

from __future__ import annotations

import re
from pathlib import Path

from haystack import Document, Pipeline, component
from haystack.components.builders import PromptBuilder
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

CORPUS = Path(__file__).resolve().parent.parent / "demo" / "corpus"
TEMPLATE = """Answer from these documents only:
{% for document in documents %}
{{ document.content }}
{% endfor %}
Question: {{ question }}"""


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@component
class ExtractiveGenerator:
    """Stand-in generator: the context sentence sharing the most words with the question."""

    @component.output_types(replies=list[str])
    def run(self, prompt: str) -> dict[str, list[str]]:
        context, _, question = prompt.rpartition("Question: ")
        asked = set(words(question))
        sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n", context) if s.strip()][1:]
        best = max(sentences, key=lambda s: len(asked & set(words(s))), default="")
        return {"replies": [best.strip() if asked & set(words(best)) else "I don't know."]}


def load_documents() -> list[Document]:
    """One Document per paragraph of each handbook page; the page id is meta["source"]."""
    documents = []
    for path in sorted(CORPUS.glob("*.md")):
        _, front, body = path.read_text(encoding="utf-8").split("---\n", 2)
        page = re.search(r"^id: (.+)$", front, re.M).group(1).strip()  # type: ignore[union-attr]
        for i, paragraph in enumerate(p.strip() for p in body.split("\n\n") if p.strip()):
            documents.append(Document(id=f"{page}#{i}", content=paragraph, meta={"source": page}))
    return documents


store = InMemoryDocumentStore()
store.write_documents(load_documents())
rag = Pipeline()
rag.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=5))
rag.add_component(
    "prompt_builder", PromptBuilder(template=TEMPLATE, required_variables=["documents", "question"])
)
rag.add_component("llm", ExtractiveGenerator())
rag.connect("retriever.documents", "prompt_builder.documents")
rag.connect("prompt_builder.prompt", "llm.prompt")
