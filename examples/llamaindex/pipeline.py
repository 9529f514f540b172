"""A LlamaIndex RAG pipeline over the Quillstack handbook: ``VectorStoreIndex`` and a query engine.

Written the way LlamaIndex users write one. The embedding model and the LLM are small
deterministic stand-ins of this example's own (hashed bag-of-words vectors; an extractive
"LLM" that answers with the context sentence sharing the most words with the question), so it
runs offline and gives the same answers every time. Swap in real ones through
``Settings.embed_model`` / ``Settings.llm`` and nothing else changes.

ragproof runs it with ``adapter: {type: llamaindex, target: pipeline:query_engine}`` (see
ragproof.yaml): the response's ``source_nodes`` are the retrieved chunks, each node's
``ref_doc_id`` (the handbook page) its document id, and ``run.k`` becomes the retriever's
``similarity_top_k``.
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import Any

from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.node_parser import SentenceSplitter

CORPUS = Path(__file__).resolve().parent.parent / "demo" / "corpus"
DIMENSIONS = 256


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def hashed_vector(text: str) -> list[float]:
    """Bag of words hashed into DIMENSIONS buckets, unit length."""
    vector = [0.0] * DIMENSIONS
    for word in words(text):
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class HashedEmbedding(BaseEmbedding):
    def _get_query_embedding(self, query: str) -> list[float]:
        return hashed_vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return hashed_vector(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return hashed_vector(query)


class ExtractiveLLM(CustomLLM):
    """Stand-in LLM: the context sentence sharing the most words with the query."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="extractive")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        context, _, query = prompt.partition("Query: ")
        asked = set(words(query.split("\n")[0]))
        sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n", context) if s.strip()]
        best = max(sentences, key=lambda s: len(asked & set(words(s))), default="")
        return CompletionResponse(text=best.strip() if asked & set(words(best)) else "I don't know.")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt, formatted, **kwargs)


def load_documents() -> list[Document]:
    documents = []
    for path in sorted(CORPUS.glob("*.md")):
        _, front, body = path.read_text(encoding="utf-8").split("---\n", 2)
        page = re.search(r"^id: (.+)$", front, re.M).group(1).strip()  # type: ignore[union-attr]
        documents.append(Document(text=body.strip(), doc_id=page))
    return documents


Settings.embed_model = HashedEmbedding()
Settings.llm = ExtractiveLLM()
# Node ids from the page id and position, so they are the same in every run.
splitter = SentenceSplitter(chunk_size=128, chunk_overlap=0, id_func=lambda i, doc: f"{doc.doc_id}#{i}")
index = VectorStoreIndex.from_documents(load_documents(), transformations=[splitter])
query_engine = index.as_query_engine(similarity_top_k=5)
