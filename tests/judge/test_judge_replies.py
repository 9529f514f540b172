"""Finding and validating the JSON object in a judge reply."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate.judge.replies import ClaimsReply, ReplyError, extract_json_object, parse_reply


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Verdict:\n```json\n{"a": {"b": [1, 2]}}\n```\nDone.', {"a": {"b": [1, 2]}}),
        ('I think {maybe} so. {"a": "}{"} and {"b": 2}', {"a": "}{"}),
        ('{"a": "quote \\" and brace }"}', {"a": 'quote " and brace }'}),
        ('[1, 2] then {"x": null}', {"x": None}),
        ('{"outer": {"inner": 1}, "n": 2} trailing }', {"outer": {"inner": 1}, "n": 2}),
    ],
)
def test_first_balanced_object_is_found(text: str, expected: dict[str, Any]) -> None:
    assert extract_json_object(text) == expected


@pytest.mark.parametrize("text", ["", "no braces", "{unclosed", '{"a": 1', "{not json}", "[1, 2]"])
def test_no_object_is_a_reply_error(text: str) -> None:
    with pytest.raises(ReplyError, match="no JSON object"):
        extract_json_object(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@given(
    st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    st.text(alphabet=st.characters(blacklist_characters="{"), max_size=30),
    st.text(max_size=30),
)
def test_object_wrapped_in_prose_round_trips(obj: dict[str, Any], before: str, after: str) -> None:
    assert extract_json_object(before + json.dumps(obj) + after) == obj


def test_validation_error_names_the_field() -> None:
    with pytest.raises(ReplyError, match=r"claims\.0\.supported: Input should be a valid boolean"):
        parse_reply("claims", '{"claims": [{"claim": "x", "supported": "sometimes"}]}')
    reply = parse_reply(
        "claims", '{"claims": [{"claim": "x", "supported": true, "why": "extra"}], "note": 1}'
    )
    assert isinstance(reply, ClaimsReply) and reply.claims[0].supported is True
