"""A deterministic in-process pipeline for runner tests (python adapter target ``tiny_pipeline:Tiny``).

Answers come from a fixed table keyed by the word after "about" in the question; ``[sleep=S]``
in a question delays both calls by S seconds; ``[hang]`` never returns within any test
timeout; ``[fail]`` raises. Each call appends a line to $TINY_CALL_LOG when that is set, so
tests can count which cases reached the pipeline.
"""

import asyncio
import os
import re

FACTS = {
    "refunds": ("doc-1", "Refunds are accepted within 30 days."),
    "shipping": ("doc-2", "Orders ship within 2 business days."),
    "warranty": ("doc-3", "The warranty lasts 12 months."),
    "support": ("doc-4", "Support is open 9 to 5 on weekdays."),
}


def _topic(question):
    match = re.search(r"about (\w+)", question)
    return match.group(1) if match else ""


def _log(kind, question):
    path = os.environ.get("TINY_CALL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{kind}\t{question}\n")


async def _behave(question):
    match = re.search(r"\[sleep=([0-9.]+)\]", question)
    if match:
        await asyncio.sleep(float(match.group(1)))
    if "[hang]" in question:
        await asyncio.sleep(60)
    if "[fail]" in question:
        raise RuntimeError("index offline")


class Tiny:
    async def retrieve(self, question, k):
        _log("retrieve", question)
        await _behave(question)
        ranked = sorted(FACTS.items(), key=lambda item: (item[0] != _topic(question), item[0]))
        return [{"id": doc, "text": text, "metadata": {"document_id": doc}} for _, (doc, text) in ranked[:k]]

    async def answer(self, question):
        _log("answer", question)
        await _behave(question)
        fact = FACTS.get(_topic(question))
        if fact is None:
            return {"text": "I don't know.", "citations": []}
        return {"text": fact[1], "citations": [fact[0]]}


class TinySync:
    """Plain (not async) methods; ``[block]`` blocks the calling thread for an hour."""

    def retrieve(self, question, k):
        if "[block]" in question:
            import time

            time.sleep(3600)
        return [{"id": "doc-1", "text": question}]

    def answer(self, question):
        return {"text": "sync answer"}
