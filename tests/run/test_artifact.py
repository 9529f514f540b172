"""Run artifact IO: atomic writes, strict capped reads from directories and zips, shard merges."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.core.errors import DataError, UsageError
from gate.model.artifact import (
    ROWS_FILE,
    RUN_FILE,
    SCHEMA_VERSION,
    SUMMARY_FILE,
    CostInfo,
    DatasetInfo,
    JudgeInfo,
    Row,
    RunArtifact,
    RunMeta,
    ShardInfo,
    Summary,
    ToolInfo,
)
from gate.model.records import Answer, Chunk, MetricResult
from gate.run import artifact_io, zipread
from gate.run.artifact_io import read_artifact, write_artifact
from gate.run.shards import merge_artifacts


def _meta(**fields: Any) -> RunMeta:
    base: dict[str, Any] = {
        "run_id": "r1",
        "created_at": "2026-01-01T00:00:00Z",
        "tool": ToolInfo(version="0.1.0"),
        "dataset": DatasetInfo(path="cases.jsonl", sha256="a" * 64, case_count=4),
        "config_hash": "c" * 64,
        "k": 5,
        "source_match": "chunk",
        "metrics": ["m"],
    }
    return RunMeta(**{**base, **fields})


def _row(case_id: str, position: int, **fields: Any) -> Row:
    values: dict[str, Any] = {
        "case_id": case_id,
        "position": position,
        "kind": "qa",
        "status": "ok",
        "latency_ms": 1.5,
        "retrieved": [Chunk(id="c1", text="text", metadata={"document_id": "d"})],
        "answer": Answer(text="an answer", citations=["c1"]),
        "metrics": {"m": MetricResult.scored(0.5)},
    }
    return Row(**{**values, **fields})


def _summary(cases: int = 2) -> Summary:
    return Summary(cases=cases, failures=0, adapter_failure_rate=0.0)


def test_round_trip_through_a_directory(tmp_path: Path) -> None:
    rows = [_row("a", 0), _row("b", 1, status="timeout", error="no result within 1 s")]
    out = write_artifact(tmp_path / "run", _meta(), rows, _summary())
    loaded = read_artifact(out)
    assert loaded.meta == _meta() and loaded.rows == rows and loaded.summary == _summary()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no staging directory left behind
    assert json.loads((out / RUN_FILE).read_text())["schema_version"] == SCHEMA_VERSION


def test_rewrite_replaces_a_previous_artifact_whole(tmp_path: Path) -> None:
    write_artifact(tmp_path / "run", _meta(run_id="old"), [_row("a", 0), _row("b", 1)], _summary())
    write_artifact(tmp_path / "run", _meta(run_id="new"), [_row("c", 0)], _summary(1))
    loaded = read_artifact(tmp_path / "run")
    assert loaded.meta.run_id == "new" and [r.case_id for r in loaded.rows] == ["c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_refuses_to_replace_a_directory_that_is_not_an_artifact(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print()")
    with pytest.raises(UsageError, match="not a run artifact; refusing to replace it"):
        write_artifact(tmp_path / "src", _meta(), [], _summary(0))
    assert (tmp_path / "src" / "main.py").exists()


def test_extra_files_are_copied_and_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifact_io, "MAX_EXTRA_FILE_BYTES", 10)
    log = tmp_path / "stderr.log"
    log.write_bytes(b"0123456789abcdef")
    out = write_artifact(tmp_path / "run", _meta(), [], _summary(0), extra_files={"adapter-stderr.log": log})
    assert (out / "adapter-stderr.log").read_bytes() == b"0123456789\n[ragproof] truncated at 10 bytes\n"


def _zip(path: Path, files: dict[str, bytes], prefix: str = "") -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(prefix + name, data)
    return path


def _files(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in (RUN_FILE, ROWS_FILE, SUMMARY_FILE)}


@pytest.mark.parametrize("prefix", ["", "ragproof-run/"])
def test_reads_a_zip_with_files_at_the_root_or_in_one_folder(tmp_path: Path, prefix: str) -> None:
    out = write_artifact(tmp_path / "run", _meta(), [_row("a", 0)], _summary(1))
    loaded = read_artifact(_zip(tmp_path / "run.zip", _files(out), prefix))
    assert loaded.rows == [_row("a", 0)] and loaded.source == str(tmp_path / "run.zip")


def _good_files(tmp_path: Path) -> dict[str, bytes]:
    return _files(write_artifact(tmp_path / "good", _meta(), [_row("a", 0)], _summary(1)))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("../escape.txt", "unsafe zip entry '../escape.txt'"),
        ("/etc/passwd", "unsafe zip entry '/etc/passwd'"),
        ("run/../../x", "unsafe zip entry 'run/../../x'"),
    ],
)
def test_unsafe_zip_entries_are_refused(tmp_path: Path, entry: str, message: str) -> None:
    files = {**_good_files(tmp_path), entry: b"x"}
    with pytest.raises(DataError, match=message):
        read_artifact(_zip(tmp_path / "evil.zip", files))


def test_symlink_zip_entries_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "link.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in _good_files(tmp_path).items():
            archive.writestr(name, data)
        link = zipfile.ZipInfo("rows-link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(DataError, match="zip entry 'rows-link' is a symbolic link"):
        read_artifact(path)


def test_too_many_zip_entries(tmp_path: Path) -> None:
    files = {**_good_files(tmp_path), **{f"junk/{i}": b"" for i in range(zipread.MAX_ZIP_ENTRIES)}}
    with pytest.raises(DataError, match="zip entries exceed the limit of 64"):
        read_artifact(_zip(tmp_path / "many.zip", files))


def test_size_caps_apply_to_directories_and_to_decompressed_zip_members(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = write_artifact(tmp_path / "run", _meta(), [_row(str(i), i) for i in range(50)], _summary(50))
    monkeypatch.setitem(artifact_io.MAX_FILE_BYTES, ROWS_FILE, 1000)
    with pytest.raises(DataError, match=r"rows.jsonl: larger than the 1000 byte limit"):
        read_artifact(out)
    with pytest.raises(DataError, match=r"run.zip/rows.jsonl: larger than the 1000 byte limit"):
        read_artifact(_zip(tmp_path / "run.zip", _files(out)))


@pytest.mark.parametrize("name", [RUN_FILE, SUMMARY_FILE])
@pytest.mark.parametrize("new_key", [True, False])
def test_newer_schema_is_refused_with_a_clear_message(tmp_path: Path, name: str, new_key: bool) -> None:
    # With a key this version does not know (validation fails) or without one (it passes).
    out = write_artifact(tmp_path / "run", _meta(), [], _summary(0))
    raw = json.loads((out / name).read_text())
    raw["schema_version"] = SCHEMA_VERSION + 1
    if new_key:
        raw["field_from_the_future"] = True
    (out / name).write_text(json.dumps(raw))
    with pytest.raises(
        DataError,
        match=rf"{name}: schema_version 2 is newer than this ragproof reads \(1\); upgrade ragproof",
    ):
        read_artifact(out)


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_leaves_the_garbage_collector_as_it_was(tmp_path: Path, enabled: bool) -> None:
    import gc

    out = write_artifact(tmp_path / "run", _meta(), [_row("a", 0), _row("b", 1)], _summary(2))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ROWS_FILE).write_text('{"case_id": "a"}\n')
    for name in (RUN_FILE, SUMMARY_FILE):
        (tmp_path / "bad" / name).write_bytes((out / name).read_bytes())
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        assert [r.case_id for r in read_artifact(out).rows] == ["a", "b"]
        assert gc.isenabled() is enabled
        with pytest.raises(DataError, match=r"bad/rows.jsonl:1: kind: Field required"):
            read_artifact(tmp_path / "bad")
        assert gc.isenabled() is enabled and gc.get_freeze_count() == 0
    finally:
        gc.enable() if was else gc.disable()


def test_equal_metric_results_share_one_instance_and_rows_write_back_the_same_bytes(tmp_path: Path) -> None:
    skipped = MetricResult.skipped("case has no expected_answer")
    judged = MetricResult.scored(1.0, judge={"model": "m"})
    per_row = [
        {"m": MetricResult.scored(1.0), "n": skipped, "j": judged},
        {"m": MetricResult.scored(1.0), "n": skipped, "j": judged},
        {"m": MetricResult.scored(-0.0), "n": MetricResult.skipped("another reason"), "j": judged},
        {"m": MetricResult.scored(0.0), "n": skipped, "j": judged},
    ]
    rows = [_row(f"c{i}", i, metrics=metrics) for i, metrics in enumerate(per_row)]
    out = write_artifact(tmp_path / "run", _meta(), rows, _summary(4))
    loaded = read_artifact(out).rows
    m, n, j = ([row.metrics[name] for row in loaded] for name in ("m", "n", "j"))
    assert m[0] is m[1] and n[0] is n[1] is n[3]  # equal results: one instance
    assert m[2] is not m[3] and str(m[2].value) == "-0.0"  # -0.0 and 0.0 stay apart
    assert n[2] is not n[0] and n[2].reason == "another reason"
    assert j[0] is not j[1]  # results with judge details are kept as read
    assert loaded == rows
    with pytest.raises(ValueError, match="frozen"):
        m[0].value = 0.0
    again = write_artifact(tmp_path / "again", _meta(), loaded, _summary(4))
    assert (again / ROWS_FILE).read_bytes() == (out / ROWS_FILE).read_bytes()
    # A hand-written line may leave fields out: results with other fields set stay apart.
    lines = [
        '{"case_id": "a", "kind": "qa", "status": "ok", "metrics": {"m": {"status": "scored", "value": 1.0}}}',
        '{"case_id": "b", "kind": "qa", "status": "ok", "metrics": {"m": {"status": "scored", "value": 1.0, "reason": null}}}',
    ]
    (out / ROWS_FILE).write_text("\n".join(lines) + "\n")
    first, second = (row.metrics["m"] for row in read_artifact(out).rows)
    assert first is not second and second.model_fields_set == {"status", "value", "reason"}


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (RUN_FILE, b"{not json", r"run.json: malformed JSON"),
        (RUN_FILE, None, r"run.json: unexpected: unknown key"),
        (
            ROWS_FILE,
            b'{"case_id": "a", "kind": "qa", "status": "ok"}\n{"case_id": "a", "kind": "qa", "status": "ok"}\n',
            r"rows.jsonl:2: case_id: duplicate 'a' \(first at line 1\)",
        ),
        (
            ROWS_FILE,
            b'{"case_id": "a", "kind": "qa", "status": "ok", "latency_ms": "fast"}\n',
            r"rows.jsonl:1: latency_ms: Input should be a valid number",
        ),
        (SUMMARY_FILE, b"\xff\xfe", r"summary.json: not UTF-8 text"),
        (SUMMARY_FILE, b'{"cases": 1,', r"summary.json: malformed JSON \(Expecting"),
        (
            ROWS_FILE,
            b'\n  \n{"case_id": "a", "kind": "qa",\n',
            r"rows.jsonl:3: malformed JSON \(Expecting property name enclosed in double quotes at column 31\)",
        ),
    ],
)
def test_malformed_files_name_the_file_and_line(
    tmp_path: Path, name: str, content: bytes | None, message: str
) -> None:
    out = write_artifact(tmp_path / "run", _meta(), [_row("a", 0)], _summary(1))
    if content is None:
        raw = json.loads((out / name).read_text())
        raw["unexpected"] = 1
        content = json.dumps(raw).encode()
    (out / name).write_bytes(content)
    with pytest.raises(DataError, match=message):
        read_artifact(out)


def test_missing_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"not a run artifact \(run.json missing\)"):
        read_artifact(tmp_path / "empty")
    (tmp_path / "x.zip").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="neither a run artifact directory nor a zip file"):
        read_artifact(tmp_path / "x.zip")


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(max_size=30), min_size=1, max_size=5))
def test_any_text_round_trips(tmp_path: Path, texts: list[str]) -> None:
    rows = [
        Row(case_id=f"{i}:{t}", position=i, kind="qa", tags=[t], status="ok", answer=Answer(text=t))
        for i, t in enumerate(texts)
    ]
    dataset = DatasetInfo(path="cases.jsonl", sha256="a" * 64, case_count=len(rows))
    out = write_artifact(tmp_path / "rt", _meta(dataset=dataset), rows, _summary(len(rows)))
    assert read_artifact(out).rows == rows


# -- merge ----------------------------------------------------------------------------------


def _part(index: int, count: int, rows: list[Row], **meta: Any) -> RunArtifact:
    return RunArtifact(
        meta=_meta(shard=ShardInfo(index=index, count=count), **meta),
        rows=rows,
        summary=_summary(len(rows)),
        source=f"part{index}",
    )


def test_merge_orders_rows_by_dataset_position_and_sums_costs() -> None:
    parts = [
        _part(2, 2, [_row("b", 1), _row("d", 3)], cost=CostInfo(usd=0.5, judge_calls=3), wall_time_s=4.0),
        _part(1, 2, [_row("a", 0), _row("c", 2)], cost=CostInfo(usd=0.25, judge_calls=1), wall_time_s=2.0),
    ]
    meta, rows = merge_artifacts(parts)
    assert [r.case_id for r in rows] == ["a", "b", "c", "d"]
    assert meta.cost.usd == 0.75 and meta.cost.judge_calls == 4 and meta.wall_time_s == 4.0
    assert meta.status == "complete" and meta.shard is None and meta.run_id != "r1"


def test_merge_status_with_missing_or_aborted_parts() -> None:
    assert merge_artifacts([_part(1, 3, [_row("a", 0)])])[0].status == "partial"
    parts = [_part(1, 2, [_row("a", 0)]), _part(2, 2, [_row("b", 1)], status="aborted:budget")]
    assert merge_artifacts(parts)[0].status == "aborted:budget"


@pytest.mark.parametrize(
    ("other", "message"),
    [
        (
            {"dataset": DatasetInfo(path="cases.jsonl", sha256="b" * 64, case_count=4)},
            "part2: dataset differs from part1's",
        ),
        ({"config_hash": "d" * 64}, "part2: config hash differs from part1's"),
        ({"judge": JudgeInfo(model="gpt-x")}, "part2: judge differs from part1's"),
    ],
)
def test_merge_refuses_parts_that_disagree(other: dict[str, Any], message: str) -> None:
    with pytest.raises(DataError, match=message):
        merge_artifacts([_part(1, 2, [_row("a", 0)]), _part(2, 2, [_row("b", 1)], **other)])


def test_merge_refuses_duplicates_and_unsharded_parts() -> None:
    with pytest.raises(DataError, match="shard 1 also given as part1"):
        merge_artifacts([_part(1, 2, [_row("a", 0)]), _part(1, 2, [_row("b", 1)])])
    with pytest.raises(DataError, match="case 'a' also in part1"):
        merge_artifacts([_part(1, 2, [_row("a", 0)]), _part(2, 2, [_row("a", 0)])])
    whole = RunArtifact(meta=_meta(), rows=[], summary=_summary(0), source="whole")
    with pytest.raises(DataError, match="whole: not a shard"):
        merge_artifacts([whole])
    with pytest.raises(DataError, match="shard count 3 differs"):
        merge_artifacts([_part(1, 2, []), _part(2, 3, [])])


def _dataset_run(tmp_path: Path, cases: list[Any]) -> Path:
    from gate.model.dataset import dataset_sha256

    meta = _meta(dataset=DatasetInfo(path="cases.jsonl", sha256=dataset_sha256(cases), case_count=len(cases)))
    rows = [_row(c.id, i) for i, c in enumerate(cases)]
    return write_artifact(tmp_path / "run", meta, rows, _summary(len(rows)), cases=cases)


def _cases() -> list[Any]:
    from gate.model.dataset import Case

    return [
        Case(id="a", question="What is é?", expected_source_ids=["d1"], tags=["t:1"], metadata={"n": 1}),
        Case(id="b", question="Why\u2028not?", kind="unanswerable", relevance={"d2": 2.0}),
    ]


def test_the_dataset_copy_reads_back_as_the_cases_written(tmp_path: Path) -> None:
    cases = _cases()
    assert read_artifact(_dataset_run(tmp_path, cases)).cases == tuple(cases)


def test_a_dataset_copy_in_another_layout_still_reads_when_its_cases_hash_to_run_json(tmp_path: Path) -> None:
    # Keys in another order and spaces: not the file's own sha256, the canonical one matches.
    out = _dataset_run(tmp_path, _cases())
    text = (out / "dataset.jsonl").read_text()
    lines = [json.dumps(dict(reversed(json.loads(line).items()))) for line in text.split("\n") if line]
    (out / "dataset.jsonl").write_text("\n".join(lines) + "\n\n")
    assert [c.id for c in read_artifact(out).cases or ()] == ["a", "b"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda ls: [ls[0], ls[1].replace('"question":"Why', '"question":1,"x":"Why')], "dataset.jsonl:2: "),
        (lambda ls: [ls[0], ls[0]], "dataset.jsonl:2: id: duplicate case id 'a'"),
    ],
)
def test_a_bad_dataset_copy_whose_bytes_match_run_json_names_its_line(
    tmp_path: Path, edit: Any, message: str
) -> None:
    # run.json carries the sha256 of the edited file's own bytes: only validation can refuse it.
    import hashlib

    out = _dataset_run(tmp_path, _cases())
    text = "\n".join(edit((out / "dataset.jsonl").read_text().split("\n")[:2])) + "\n"
    (out / "dataset.jsonl").write_text(text)
    run = json.loads((out / RUN_FILE).read_text())
    run["dataset"]["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (out / RUN_FILE).write_text(json.dumps(run))
    with pytest.raises(DataError, match=message.replace("(", r"\(")):
        read_artifact(out)
    # compare's reading (cases=False) checks such a copy by its bytes' hash alone: it never
    # uses the cases, so it does not validate them one by one, and keeps none
    assert read_artifact(out, cases=False).cases is None


def test_without_cases_a_copy_is_still_checked_unless_its_bytes_carry_run_json_hash(tmp_path: Path) -> None:
    out = _dataset_run(tmp_path, _cases())
    whole = read_artifact(out)
    light = read_artifact(out, cases=False)
    assert whole.cases is not None and light.cases is None
    assert light.rows == whole.rows and light.meta == whole.meta
    # another layout of the same cases: validated in full, then dropped
    text = (out / "dataset.jsonl").read_text()
    (out / "dataset.jsonl").write_text(text.replace('"id":"b"', '"id": "b"'))
    assert read_artifact(out, cases=False).cases is None
    # another layout of other cases: refused, as with cases=True
    (out / "dataset.jsonl").write_text(text.replace('"id":"b"', '"id": "c"'))
    for keep in (True, False):
        with pytest.raises(DataError, match="dataset.jsonl: sha256 of the cases does not match"):
            read_artifact(out, cases=keep)
    # and a malformed line in a copy that does not hash as written names its line
    (out / "dataset.jsonl").write_text(text.replace('"id":"b"', '"id": 1.5'))
    with pytest.raises(DataError, match="dataset.jsonl:2: "):
        read_artifact(out, cases=False)
