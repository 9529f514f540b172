"""The record of an acceptance in a report, and what started a run (gate.github.accept)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gate.github.accept import (
    LabelEvent,
    Trigger,
    carried_record,
    record_line,
    recorded_acceptance,
    with_record,
)

SHA = "ab" * 20
MARK = "<!-- ragproof:ragproof -->"


def test_the_record_is_read_from_the_second_line_only() -> None:
    record = record_line(SHA, "mia")
    assert record == f"<!-- ragproof:accepted sha={SHA} by=mia -->"
    assert recorded_acceptance(f"{MARK}\n{record}\n## ragproof: ❌ Blocked\n") == (SHA, "mia")
    assert recorded_acceptance(f"\n  {MARK}\n{record}  \n") == (SHA, "mia")  # as GitHub may return it
    # anywhere else (a case's text in the report cannot reach line 2) it is not a record
    assert recorded_acceptance(f"{MARK}\n## ragproof: ❌ Blocked\n{record}\n") is None
    assert recorded_acceptance(record) is None
    assert recorded_acceptance(None) is None
    # nor is a malformed one: a short sha, upper case, extra text on the line
    assert recorded_acceptance(f"{MARK}\n<!-- ragproof:accepted sha={SHA[:7]} by=mia -->") is None
    assert recorded_acceptance(f"{MARK}\n<!-- ragproof:accepted sha={SHA.upper()} by=mia -->") is None
    assert recorded_acceptance(f"{MARK}\n{record} and more") is None
    assert recorded_acceptance(f"{MARK}\n{record_line(SHA, 'github-actions[bot]')}") == (
        SHA,
        "github-actions[bot]",
    )


def test_what_started_the_run() -> None:
    when = datetime(2026, 12, 1, 10, tzinfo=UTC)
    label = LabelEvent("Mia", when)
    assert Trigger(labeled_by="mia").applied(label)  # logins compare without case
    assert not Trigger(labeled_by="mallory").applied(label)
    assert not Trigger().applied(label)
    later, earlier = when + timedelta(seconds=3), when - timedelta(seconds=3)
    head = earlier - timedelta(hours=1)  # the commit under test was the head before the label
    assert Trigger(started_by="mia", started_at=later, head_since=head).applied(label)
    assert Trigger(started_by="mia", started_at=when, head_since=when).applied(label)
    assert not Trigger(started_by="mia", started_at=earlier, head_since=head).applied(label)
    assert not Trigger(started_by="mallory", started_at=later, head_since=head).applied(label)
    assert not Trigger(started_by="mia", started_at=later, head_since=head).applied(LabelEvent("mia", None))
    # the label was given on another head: this commit was first seen after it, or never
    assert not Trigger(started_by="mia", started_at=later, head_since=later).applied(label)
    assert not Trigger(started_by="mia", started_at=later).applied(label)
    # the head was force-pushed after the label: it may have left and come back
    moved = LabelEvent("Mia", when, head_moved=True)
    assert not Trigger(started_by="mia", started_at=later, head_since=head).applied(moved)
    assert Trigger(labeled_by="mia").applied(moved)  # the labeled event's own head is the one given on


def test_the_record_goes_on_the_second_line_after_the_marker() -> None:
    record = record_line(SHA, "mia")
    report = f"{MARK}\n## ragproof: ❌ Blocked\n"
    assert with_record(report, MARK, SHA, "mia") == f"{MARK}\n{record}\n## ragproof: ❌ Blocked\n"
    # a report without the marker gets it (as the comment would), then the record
    assert with_record("## ragproof\n", MARK, SHA, "mia") == f"{MARK}\n{record}\n## ragproof\n"
    assert recorded_acceptance(with_record(report, MARK, SHA, "mia")) == (SHA, "mia")


def test_a_record_is_carried_to_the_next_report_of_the_same_commit_only() -> None:
    previous = with_record(f"{MARK}\n## old\n", MARK, SHA, "mia")
    report = f"{MARK}\n## new\n"
    assert carried_record(report, previous, SHA, MARK) == with_record(report, MARK, SHA, "mia")
    assert carried_record(report, previous, "cd" * 20, MARK) == report  # another commit
    assert carried_record(report, None, SHA, MARK) == report  # no comment yet
    assert carried_record(report, f"{MARK}\n## old\n", SHA, MARK) == report  # no record in it
    newer = with_record(report, MARK, SHA, "rex")  # the report's own record wins
    assert carried_record(newer, previous, SHA, MARK) == newer
