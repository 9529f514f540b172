"""Answer metrics: SQuAD exact match and token F1, numeric match."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from metric_helpers import make_case, make_output, score

from gate.metrics.answer import (
    REASON_EMPTY_EXPECTED,
    REASON_NO_EXPECTED_NUMBER,
    extract_numbers,
    normalize_answer,
    numbers_match,
    numeric_score,
    token_f1,
)
from gate.metrics.base import REASON_NO_ANSWER, REASON_NO_EXPECTED_ANSWER, ScoringContext
from gate.model.config import ScoringSettings


def test_squad_normalisation_lower_punctuation_articles_whitespace() -> None:
    assert normalize_answer("  The  Refund-Window, is: 30 DAYS! ") == "refundwindow is 30 days"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"


def test_exact_match_after_normalisation() -> None:
    case = make_case(expected_answer="30 days")
    assert score("answer.exact_match", case, make_output(answer="The 30 days.")).value == 1.0
    assert score("answer.exact_match", case, make_output(answer="30 business days")).value == 0.0


def test_token_f1_partial_overlap_exact_value() -> None:
    # predicted: [refund, window, is, 30, days]; expected: [30, days] -> P 2/5, R 1, F1 4/7
    case = make_case(expected_answer="30 days")
    value = score("answer.token_f1", case, make_output(answer="The refund window is 30 days")).value
    assert value == pytest.approx(4 / 7)


def test_token_f1_counts_repeated_tokens_as_multiset() -> None:
    assert token_f1("days days days", "days") == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))


def test_exact_match_and_f1_skip_when_expected_normalises_to_nothing() -> None:
    case = make_case(expected_answer="The.")
    for name in ("answer.exact_match", "answer.token_f1"):
        result = score(name, case, make_output(answer="the"))
        assert (result.status, result.reason) == ("skipped", REASON_EMPTY_EXPECTED)


def test_empty_answer_against_real_expected_scores_0() -> None:
    case = make_case(expected_answer="30 days")
    assert score("answer.token_f1", case, make_output(answer="")).value == 0.0
    assert score("answer.exact_match", case, make_output(answer="")).value == 0.0


def test_answer_metrics_skip_without_expected_answer_or_answer() -> None:
    for name in ("answer.exact_match", "answer.token_f1", "answer.numeric_match"):
        result = score(name, make_case(), make_output(answer="x"))
        assert (result.status, result.reason) == ("skipped", REASON_NO_EXPECTED_ANSWER)
        result = score(name, make_case(expected_answer="5"), make_output(["a"]))
        assert (result.status, result.reason) == ("skipped", REASON_NO_ANSWER)


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("Revenue was $1.04 billion and costs $283 million", [1.04e9, 283e6]),
        ("$1,038,765 thousand", [1_038_765_000.0]),
        ("grew 12.3% year over year", [12.3]),
        ("grew 12.3 percent", [12.3]),
        ("5k users, 3.5M rows, 2B events, 4bn dollars", [5e3, 3.5e6, 2e9, 4e9]),
        ("€7.5 and £3 and ¥100", [7.5, 3.0, 100.0]),
        ("-5 and \u22127 and -$3", [-5.0, -7.0, -3.0]),
        ("from 2019-2020", [2019.0, 2020.0]),
        ("5 m away, 5min later", [5.0]),
        ("Q3 release v2.1", []),
        ("no numbers here", []),
        ("5 and 5.0 and 5", [5.0]),
        ("9" * 400 + " and 7", [7.0]),
    ],
)
def test_extract_numbers(text: str, values: list[float]) -> None:
    assert extract_numbers(text) == pytest.approx(values)


def test_numbers_match_relative_tolerance_boundary_included() -> None:
    assert numbers_match(101.0, 100.0, 0.01) is True
    assert numbers_match(101.01, 100.0, 0.01) is False
    assert numbers_match(0.303, 0.3, 0.01) is True
    assert numbers_match(0.0, 0.0, 0.01) is True
    assert numbers_match(0.001, 0.0, 0.01) is False


def test_numeric_match_rounded_magnitude_words_match_thousands_figure() -> None:
    case = make_case(expected_answer="$1,038,765 thousand")
    assert score("answer.numeric_match", case, make_output(answer="Revenue was $1.04 billion")).value == 1.0
    assert score("answer.numeric_match", case, make_output(answer="Revenue was $500 million")).value == 0.0


def test_numeric_match_is_fraction_of_expected_numbers_found() -> None:
    case = make_case(expected_answer="5 seats and 20 GB")
    assert score("answer.numeric_match", case, make_output(answer="It has 5 seats.")).value == 0.5


def test_numeric_match_uses_configured_tolerance() -> None:
    case = make_case(expected_answer="100")
    out = make_output(answer="about 104")
    assert score("answer.numeric_match", case, out).value == 0.0
    assert (
        score(
            "answer.numeric_match",
            case,
            out,
            ScoringContext(settings=ScoringSettings(numeric_tolerance=0.05)),
        ).value
        == 1.0
    )


def test_numeric_match_expected_without_numbers_skips_not_vacuous_1() -> None:
    result = score("answer.numeric_match", make_case(expected_answer="Paris"), make_output(answer="Paris"))
    assert (result.status, result.reason, result.value) == ("skipped", REASON_NO_EXPECTED_NUMBER, None)


def test_numeric_match_answer_without_numbers_scores_0() -> None:
    assert (
        score("answer.numeric_match", make_case(expected_answer="12%"), make_output(answer="a lot")).value
        == 0.0
    )


def test_numeric_match_percentage_is_number_shown() -> None:
    assert numeric_score("12 percent", "12%", 0.01) == 1.0
    assert numeric_score("0.12", "12%", 0.01) == 0.0


@given(st.text(max_size=60), st.text(max_size=60))
def test_property_answer_metrics_in_unit_interval(predicted: str, expected: str) -> None:
    assert 0.0 <= token_f1(predicted, expected) <= 1.0
    value = numeric_score(predicted, expected, 0.01)
    assert value is None or 0.0 <= value <= 1.0


@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False).map(lambda v: round(v, 2)))
def test_property_plain_decimal_round_trips(value: float) -> None:
    assert extract_numbers(f"the value is {value:.2f} today") == pytest.approx([value])
