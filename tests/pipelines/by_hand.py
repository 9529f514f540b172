"""The framework examples wrapped by hand for the python adapter, as users wrote them before the
framework adapters existed: every line converts framework objects into ragproof's chunk shape.

``FRAMEWORK_EXAMPLE`` (environment) names the example directory (examples/langchain, ...);
its ``pipeline.py`` is loaded from there under a name of its own.
"""

import importlib.util
import os
from pathlib import Path

_path = Path(os.environ["FRAMEWORK_EXAMPLE"]) / "pipeline.py"
_spec = importlib.util.spec_from_file_location(f"example_{_path.parent.name}", _path)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


def _lc_chunk(doc):
    return {"id": doc.id, "text": doc.page_content, "metadata": {"document_id": doc.metadata["source"]}}


class LangChain:
    def retrieve(self, question, k):
        return [_lc_chunk(d) for d in example.retriever.model_copy(update={"k": k}).invoke(question)]

    def answer(self, question):
        out = example.chain.invoke(question)
        return {"text": out["answer"], "retrieved_chunks": [_lc_chunk(d) for d in out["context"]]}


def _li_chunk(scored):
    node = scored.node
    return {
        "id": node.node_id,
        "text": node.text,
        "score": scored.score,
        "metadata": {**node.metadata, "document_id": node.ref_doc_id},
    }


class LlamaIndex:
    def retrieve(self, question, k):
        return [_li_chunk(n) for n in example.index.as_retriever(similarity_top_k=k).retrieve(question)]

    def answer(self, question):
        response = example.query_engine.query(question)
        return {"text": response.response, "retrieved_chunks": [_li_chunk(n) for n in response.source_nodes]}


def _hs_chunk(doc):
    return {
        "id": doc.id,
        "text": doc.content,
        "score": doc.score,
        "metadata": {"document_id": doc.meta["source"]},
    }


class Haystack:
    def _run(self, question, k):
        data = {"retriever": {"query": question, "top_k": k}, "prompt_builder": {"question": question}}
        return example.rag.run(data, include_outputs_from={"retriever"})

    def retrieve(self, question, k):
        return [_hs_chunk(d) for d in self._run(question, k)["retriever"]["documents"]]

    def answer(self, question):
        out = self._run(question, 5)
        return {
            "text": out["llm"]["replies"][0],
            "retrieved_chunks": [_hs_chunk(d) for d in out["retriever"]["documents"]],
        }
