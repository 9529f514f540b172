"""Workflow commands: outputs (multi-line safe), summary, annotations, masks, groups."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from github_helpers import parse_output_file
from hypothesis import given
from hypothesis import strategies as st
from log_commands import obeyed_commands

from gate.boundary.logguard import ZERO_WIDTH_SPACE, LogGuard, NeutralisingStream, neutralise
from gate.github.workflow import WorkflowCommands, escape_data


def _commands(tmp_path: Path) -> tuple[WorkflowCommands, io.StringIO]:
    stream = io.StringIO()
    return WorkflowCommands(
        output_path=tmp_path / "out", summary_path=tmp_path / "sum", stream=stream
    ), stream


def test_single_and_multi_line_outputs_read_back(tmp_path: Path) -> None:
    commands, _ = _commands(tmp_path)
    commands.set_output("decision", "block")
    commands.set_output("report", "line one\nline two\n\nline four")
    text = (tmp_path / "out").read_text()
    assert text.startswith("decision=block\nreport<<ghadelimiter_")
    assert parse_output_file(text) == {"decision": "block", "report": "line one\nline two\n\nline four"}


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r"), max_size=200))
def test_any_value_survives_the_heredoc(value: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out"
        WorkflowCommands(output_path=path, summary_path=None, stream=io.StringIO()).set_output(
            "v", value + "\nx"
        )
        assert parse_output_file(path.read_text())["v"] == value + "\nx"


def test_a_value_cannot_close_its_own_heredoc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import secrets

    tokens = iter(["aa", "bb"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(tokens))  # the heredoc delimiters
    commands, _ = _commands(tmp_path)
    commands.set_output("evil", "x\nghadelimiter_aa\nsecond=injected")
    values = parse_output_file((tmp_path / "out").read_text())
    assert values == {"evil": "x\nghadelimiter_aa\nsecond=injected"}


def test_annotations_escape_newlines_and_percent(tmp_path: Path) -> None:
    commands, stream = _commands(tmp_path)
    commands.error("50% worse\n::add-mask::x", title="gate: a,b")
    commands.warning("w")
    assert stream.getvalue().splitlines() == [
        # newline escaped, and the quoted text's markers broken as in all user text
        f"::error title=gate%3A a%2Cb::50%25 worse%0A:{ZERO_WIDTH_SPACE}:add-mask:{ZERO_WIDTH_SPACE}:x",
        "::warning::w",
    ]
    assert escape_data("a\r\nb") == "a%0D%0Ab"


def test_mask_group_and_summary(tmp_path: Path) -> None:
    commands, stream = _commands(tmp_path)
    commands.add_mask("s3cr3t")
    with commands.group("run"):
        print("inside", file=stream)
    commands.append_summary("## report")
    commands.append_summary("more\n\n")
    assert stream.getvalue().splitlines() == ["::add-mask::s3cr3t", "::group::run", "inside", "::endgroup::"]
    assert (tmp_path / "sum").read_text() == "## report\nmore\n"


def test_without_files_nothing_is_written(tmp_path: Path) -> None:
    commands = WorkflowCommands(output_path=None, summary_path=None, stream=io.StringIO())
    commands.set_output("a", "b")
    commands.append_summary("x")
    assert list(tmp_path.iterdir()) == []


_markers = st.text(alphabet=":#[xX\n\r ", max_size=40)


@given(_markers)
def test_neutralised_text_holds_no_command_marker_anywhere(text: str) -> None:
    out = neutralise(text)
    assert "::" not in out and "##[" not in out
    assert out.replace(ZERO_WIDTH_SPACE, "") == text


@given(_markers, st.lists(st.integers(min_value=0, max_value=40), max_size=6))
def test_markers_split_across_writes_are_broken_too(text: str, cuts: list[int]) -> None:
    target = io.StringIO()
    stream = NeutralisingStream(target)
    bounds = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    for start, end in zip(bounds, bounds[1:], strict=False):
        stream.write(text[start:end])
    out = target.getvalue()
    assert "::" not in out and "##[" not in out
    assert out.replace(ZERO_WIDTH_SPACE, "") == text


def test_untrusted_lines_are_fenced_and_own_commands_resume() -> None:
    target = io.StringIO()
    guard = LogGuard(target)
    guard.write_text("progress without a newline")
    guard.untrusted("::error::forged\n##[warning]legacy")  # no final newline
    guard.untrusted("::add-mask::x\n")
    guard.command("::add-mask::real-secret")
    guard.untrusted("::error::again\n")
    log = target.getvalue()
    lines = log.split("\n")
    first, second = lines[1].removeprefix("::stop-commands::"), lines[7].removeprefix("::stop-commands::")
    assert len(first) == 32 and len(second) == 32 and first != second
    assert lines == [
        "progress without a newline",
        f"::stop-commands::{first}",
        "::error::forged",
        "##[warning]legacy",
        "::add-mask::x",
        f"::{first}::",
        "::add-mask::real-secret",
        f"::stop-commands::{second}",
        "::error::again",
        "",
    ]
    assert obeyed_commands(log) == [
        ("stop-commands", first),
        ("add-mask", "real-secret"),
        ("stop-commands", second),
    ]


def test_workflow_commands_through_a_neutralising_stdout_stay_commands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = io.StringIO()
    stream = NeutralisingStream(target)
    monkeypatch.setattr("sys.stdout", stream)
    commands = WorkflowCommands(output_path=None, summary_path=None)
    print("a case id ::error::x from the dataset")
    commands.warning("case ::x:: failed")
    with commands.group("install"):
        stream.commands.untrusted("::error::forged\n")
    assert [name for name, _ in obeyed_commands(target.getvalue())] == [
        "warning",
        "group",
        "stop-commands",
        "endgroup",
    ]
    assert target.getvalue().startswith(f"a case id :{ZERO_WIDTH_SPACE}:error:{ZERO_WIDTH_SPACE}:x")


def test_a_marker_written_one_character_at_a_time_is_broken() -> None:
    # hypothesis found it: "#", "#", "[" in three writes reached the log as "##[".
    target = io.StringIO()
    stream = NeutralisingStream(target)
    for char in "##[":
        stream.write(char)
    assert "##[" not in target.getvalue()
    assert target.getvalue().replace(ZERO_WIDTH_SPACE, "") == "##["
