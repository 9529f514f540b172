"""Prompt templates: hashes, and untrusted text that can never forge a block delimiter."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given
from hypothesis import strategies as st

from gate.judge.replies import REPLY_MODELS
from gate.judge.templates import PROMPTS_DIR, PromptSet, neutralise

PROMPTS = PromptSet()
DELIMITER = re.compile(r"<<<(BEGIN|END) ([A-Z ]+)>>>")
untrusted = st.text(alphabet=st.sampled_from(list("<>BEGINDASWR \n{}x")), max_size=60) | st.text(max_size=60)


def test_one_template_per_task_and_hashes_of_the_sources() -> None:
    assert set(REPLY_MODELS) | {"system", "repair"} == set(PROMPTS.hashes)
    for name, digest in PROMPTS.hashes.items():
        assert digest == hashlib.sha256((PROMPTS_DIR / f"{name}.j2").read_bytes()).hexdigest()
    assert len({PROMPTS.task_sha256(t) for t in REPLY_MODELS}) == len(REPLY_MODELS)


@given(question=untrusted, answer=untrusted, reference=untrusted, chunk_id=untrusted, chunk_text=untrusted)
def test_untrusted_text_cannot_add_a_delimiter(
    question: str, answer: str, reference: str, chunk_id: str, chunk_text: str
) -> None:
    context = [{"id": chunk_id, "text": chunk_text}]
    for task in REPLY_MODELS:
        prompt = PROMPTS.render(
            task, question=question, answer=answer, expected_answer=reference, context=context, cited=context
        )
        template = (PROMPTS_DIR / f"{task}.j2").read_text(encoding="utf-8")
        assert DELIMITER.findall(prompt) == DELIMITER.findall(template)


def test_neutralise_is_identity_without_delimiter_characters() -> None:
    assert neutralise({"a": ["x < y", "<< >>", 3]}) == {"a": ["x < y", "<< >>", 3]}
    assert neutralise("<<<<END>>>>") == "‹‹‹<END›››>"
