"""Answer metrics against a case's ``expected_answer``: exact match, token F1, numeric match.

Normalisation (SQuAD): lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse
whitespace. Exact match compares normalised strings; token F1 compares the normalised token
multisets.

Edge cases, decided here:

* An expected answer that normalises to nothing (for example ``"The."``) cannot be compared:
  exact match and token F1 skip with :data:`REASON_EMPTY_EXPECTED` (SQuAD scores 1.0 when both
  sides are empty; a vacuous 1.0 would inflate the mean).
* An answer that normalises to nothing against a non-empty expected answer is a miss: 0.0.
* Numeric match skips with :data:`REASON_NO_EXPECTED_NUMBER` when the expected answer holds no
  number (the peer scores that 1.0); an answer without numbers then scores 0.0.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter

from gate.metrics.base import Need, ScoringContext, metric
from gate.model.dataset import Case
from gate.model.records import CaseOutput, MetricResult

REASON_EMPTY_EXPECTED = "expected_answer is empty after normalisation"
REASON_NO_EXPECTED_NUMBER = "expected_answer contains no number"

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower, remove punctuation, remove articles, collapse whitespace."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answer_tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def token_f1_of_tokens(predicted: list[str], expected: list[str]) -> float:
    """Harmonic mean of token precision and recall over token multisets (0.0 when either is empty)."""
    if not predicted or not expected:
        return 0.0
    common = sum((Counter(predicted) & Counter(expected)).values())
    if common == 0:
        return 0.0
    precision = common / len(predicted)
    recall = common / len(expected)
    return 2 * precision * recall / (precision + recall)


def token_f1(predicted: str, expected: str) -> float:
    """Token F1 of two texts after SQuAD normalisation (0.0 when either side has no token)."""
    return token_f1_of_tokens(answer_tokens(predicted), answer_tokens(expected))


# --------------------------------------------------------------------------- numbers

_MAGNITUDE_WORDS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "bn": 1e9, "mn": 1e6}
# Single-letter suffixes only count when glued to the number ("5k", "$1.2M", "3B"): "5 m" is metres.
_MAGNITUDE_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "bn": 1e9, "mn": 1e6, "t": 1e12, "tn": 1e12}

_NUMBER = re.compile(
    r"""
    (?<![\w.,])                                   # not inside a word, a number or a version string
    (?P<sign>[-+\u2212])?
    (?:[$€£¥₹]\s?)?                               # currency symbol
    (?P<int>\d{1,3}(?:,\d{3})+|\d+)               # 1,038,765 or 1038765
    (?P<frac>\.\d+)?
    (?:
        (?P<pct>\s?%|\s(?:percent|per\ cent)\b)
      | (?P<suffix>bn|mn|tn|[kKmMbBtT])(?![\w])
      | \s(?P<word>thousand|million|billion|trillion|bn|mn)\b
    )?
    """,
    re.VERBOSE | re.IGNORECASE,
)


def extract_numbers(text: str) -> list[float]:
    """Numeric values in ``text``, deduplicated, in order of appearance.

    Understood: a sign (``-``, ``+``, ``−``) not preceded by a word character, currency
    symbols ($ € £ ¥ ₹), thousands separators (``1,038,765``), decimals, magnitude words
    (thousand, million, billion, trillion, bn, mn — after a space) and suffixes glued to the
    number (k, m, b, bn, mn, t, tn), and percentages (``12.5%``, ``12.5 percent``: the value
    is the number shown, 12.5). Digits inside a word (``Q3``, ``COVID-19``'s 19 is kept because
    the hyphen is not a word character, ``v2.1`` is skipped) are not numbers.
    """
    values: list[float] = []
    for match in _NUMBER.finditer(text):
        value = float(match.group("int").replace(",", "") + (match.group("frac") or ""))
        if match.group("suffix"):
            value *= _MAGNITUDE_SUFFIXES[match.group("suffix").lower()]
        elif match.group("word"):
            value *= _MAGNITUDE_WORDS[match.group("word").lower()]
        if match.group("sign") in ("-", "\u2212"):
            value = -value
        # a digit string too long for a float overflows to inf: not a comparable number
        if math.isfinite(value) and value not in values:
            values.append(value)
    return values


def numbers_match(predicted: float, expected: float, tolerance: float) -> bool:
    """``|predicted - expected| <= tolerance * |expected|`` (boundary included); an expected 0 matches only 0."""
    if expected == 0:
        return predicted == 0
    # the 1e-12 absorbs binary rounding at the boundary (0.303 vs 0.3 at 1%)
    return abs(predicted - expected) <= (tolerance + 1e-12) * abs(expected)


def numeric_score(predicted_text: str, expected_text: str, tolerance: float) -> float | None:
    """Fraction of the expected numbers matched by some number of the answer; None without expected numbers."""
    expected = extract_numbers(expected_text)
    if not expected:
        return None
    predicted = extract_numbers(predicted_text)
    matched = sum(1 for e in expected if any(numbers_match(p, e, tolerance) for p in predicted))
    return matched / len(expected)


# --------------------------------------------------------------------------- metrics

_NEEDS: tuple[Need, ...] = ("answer", "expected_answer")


def _expected_words(case: Case) -> str | None:
    """Exact match and token F1 need an expected answer with a word left after normalisation."""
    return None if normalize_answer(case.expected_answer or "") else REASON_EMPTY_EXPECTED


def _expected_number(case: Case) -> str | None:
    """Numeric match needs an expected answer with a number."""
    return None if extract_numbers(case.expected_answer or "") else REASON_NO_EXPECTED_NUMBER


@metric("answer.exact_match", kind="deterministic", needs=_NEEDS, binary=True, case_rule=_expected_words)
def answer_exact_match(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """1.0 when the SQuAD-normalised answer equals the normalised expected answer, else 0.0."""
    expected = normalize_answer(case.expected_answer or "")
    return MetricResult.scored(1.0 if normalize_answer(output.answer_text) == expected else 0.0)


@metric("answer.token_f1", kind="deterministic", needs=_NEEDS, case_rule=_expected_words)
def answer_token_f1(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Token F1 between the SQuAD-normalised answer and expected answer."""
    expected = answer_tokens(case.expected_answer or "")
    return MetricResult.scored(token_f1_of_tokens(answer_tokens(output.answer_text), expected))


@metric("answer.numeric_match", kind="deterministic", needs=_NEEDS, case_rule=_expected_number)
def answer_numeric_match(case: Case, output: CaseOutput, ctx: ScoringContext) -> MetricResult:
    """Fraction of the expected answer's numbers found in the answer within the relative tolerance."""
    value = numeric_score(output.answer_text, case.expected_answer or "", ctx.settings.numeric_tolerance)
    if value is None:  # not reached through score(): the case rule skipped it first
        return MetricResult.skipped(REASON_NO_EXPECTED_NUMBER)
    return MetricResult.scored(value)
