"""Workflow commands: outputs (multi-line safe), summary, annotations, masks, groups."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gate.github.workflow import WorkflowCommands, escape_data, parse_output_file


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


def test_a_value_cannot_close_its_own_heredoc(tmp_path: Path, monkeypatch) -> None:
    import gate.github.workflow as workflow

    tokens = iter(["aa", "bb"])
    monkeypatch.setattr(workflow.secrets, "token_hex", lambda n: next(tokens))
    commands, _ = _commands(tmp_path)
    commands.set_output("evil", "x\nghadelimiter_aa\nsecond=injected")
    values = parse_output_file((tmp_path / "out").read_text())
    assert values == {"evil": "x\nghadelimiter_aa\nsecond=injected"}


def test_annotations_escape_newlines_and_percent(tmp_path: Path) -> None:
    commands, stream = _commands(tmp_path)
    commands.error("50% worse\n::add-mask::x", title="gate: a,b")
    commands.warning("w")
    assert stream.getvalue().splitlines() == [
        "::error title=gate%3A a%2Cb::50%25 worse%0A::add-mask::x",
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
