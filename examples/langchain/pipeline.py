"""A LangChain RAG pipeline over the Quillstack handbook, written the way LangChain users write one.

BM25 retrieval (``langchain_community.retrievers.BM25Retriever``, which needs ``rank_bm25``) and
an LCEL chain returning ``{"context": [Document], "input": question, "answer": str}``. The chat
model is a deterministic stand-in that answers with the first context sentence sharing the
most words with the question, so the example runs offline and gives the same answers every time.
Swap in a real chat model (``ChatOpenAI(...)``) and nothing else changes.

ragproof runs it with ``adapter: {type: langchain, target: pipeline:chain}`` (see ragproof.yaml):
no glue code. The documents carry the handbook page id in ``metadata["source"]``, which
``run.document_id_key: source`` names for document matching.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.language_models import SimpleChatModel
from langchain_core.messages import BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

CORPUS = Path(__file__).resolve().parent.parent / "demo" / "corpus"


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def load_documents() -> list[Document]:
    """One Document per paragraph of each handbook page; the page id is the source."""
    documents = []
    for path in sorted(CORPUS.glob("*.md")):
        _, front, body = path.read_text(encoding="utf-8").split("---\n", 2)
        page = re.search(r"^id: (.+)$", front, re.M).group(1).strip()  # type: ignore[union-attr]
        for i, paragraph in enumerate(p.strip() for p in body.split("\n\n") if p.strip()):
            documents.append(Document(page_content=paragraph, metadata={"source": page}, id=f"{page}#{i}"))
    return documents


class ExtractiveChatModel(SimpleChatModel):
    """Stand-in chat model: the context sentence sharing the most words with the question."""

    @property
    def _llm_type(self) -> str:
        return "extractive"

    def _call(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> str:
        context, question = str(messages[0].content), str(messages[-1].content)
        asked = set(words(question))
        sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n", context) if s.strip()]
        best = max(sentences, key=lambda s: len(asked & set(words(s))), default="")
        return best.strip() if asked & set(words(best)) else "I don't know."


def format_docs(documents: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in documents)


retriever = BM25Retriever.from_documents(load_documents(), k=5, preprocess_func=words)
prompt = ChatPromptTemplate.from_messages(
    [("system", "Answer from this context only:\n\n{context}"), ("human", "{input}")]
)
generate = RunnableLambda(lambda x: {"context": format_docs(x["context"]), "input": x["input"]})
chain = RunnableParallel(context=retriever, input=RunnablePassthrough()).assign(
    answer=generate | prompt | ExtractiveChatModel() | StrOutputParser()
)
