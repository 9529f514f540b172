"""`ragproof run/merge/report/validate` as real subprocesses: kills, resume, one-line errors."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, cast

import pytest
from run_helpers import PIPELINES, comparable, make_cases, ragproof, write_config, write_dataset

from gate.run.artifact_io import read_artifact

pytestmark = pytest.mark.slow

SLOW_CASES = 40


def _env(**extra: str) -> dict[str, str]:
    # Hermetic: CI's own CI=true would otherwise switch the progress output to plain lines.
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith(("GITHUB_", "RAGPROOF_"))}
    return {**env, **extra}


def _committed(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store, timeout=5) as conn:
            return cast("int", conn.execute("SELECT count(*) FROM case_results").fetchone()[0])
    except sqlite3.OperationalError:
        return 0  # tables not created yet


def _start_and_stop(
    tmp_path: Path, sig: int, env: dict[str, str], at_least: int = 8
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gate", "run", "-c", "ragproof.yaml", "--out", "run", "--no-progress"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    store = tmp_path / ".ragproof" / "store.sqlite"
    deadline = time.monotonic() + 120  # a hang, not a loaded machine: the cases take well under a second
    while _committed(store) < at_least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "run made no progress"
        time.sleep(0.02)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    return proc


def _slow_setup(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(SLOW_CASES, extra=" [sleep=0.04]"))
    write_config(tmp_path, adapter={"type": "python", "target": "tiny_pipeline:Tiny", "concurrency": 2})


def test_sigkill_mid_run_then_resume_gives_the_rows_of_an_uninterrupted_run(tmp_path: Path) -> None:
    _slow_setup(tmp_path)
    calls = tmp_path / "calls.log"
    killed = _start_and_stop(tmp_path, signal.SIGKILL, _env(TINY_CALL_LOG=str(calls)))
    assert killed.returncode == -signal.SIGKILL
    assert not (tmp_path / "run" / "run.json").exists()  # the artifact is only ever written whole
    committed = _committed(tmp_path / ".ragproof" / "store.sqlite")
    assert 0 < committed < SLOW_CASES
    calls.unlink()

    resumed = ragproof(
        "run", "-c", "ragproof.yaml", "--resume", "run", cwd=tmp_path, env=_env(TINY_CALL_LOG=str(calls))
    )
    assert resumed.returncode == 0, resumed.stderr
    rerun = {line.split("\t")[1] for line in calls.read_text().splitlines()}
    assert len(rerun) == SLOW_CASES - committed  # only what was not committed ran again

    reference = ragproof(
        "run", "-c", "ragproof.yaml", "--out", "reference", "--no-progress", cwd=tmp_path, env=_env()
    )
    assert reference.returncode == 0, reference.stderr
    after = read_artifact(tmp_path / "run")
    assert after.meta.status == "complete" and len(after.rows) == SLOW_CASES
    assert comparable(after) == comparable(read_artifact(tmp_path / "reference"))


def test_sigterm_stops_cleanly_with_status_partial_and_resumes(tmp_path: Path) -> None:
    _slow_setup(tmp_path)
    stopped = _start_and_stop(tmp_path, signal.SIGTERM, _env(), at_least=4)
    _, stderr = stopped.communicate()
    assert stopped.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr and "resume with --resume" in stderr
    partial = read_artifact(tmp_path / "run")
    assert partial.meta.status == "partial"
    assert 0 < len(partial.rows) < SLOW_CASES
    assert [r.position for r in partial.rows] == sorted(r.position or 0 for r in partial.rows)
    resumed = ragproof(
        "run", "-c", "ragproof.yaml", "--resume", "run", "--no-progress", cwd=tmp_path, env=_env()
    )
    assert resumed.returncode == 0, resumed.stderr
    done = read_artifact(tmp_path / "run")
    assert done.meta.status == "complete" and len(done.rows) == SLOW_CASES
    assert done.meta.run_id == partial.meta.run_id


def test_a_blocked_plain_pipeline_call_neither_loses_the_case_nor_holds_the_exit(tmp_path: Path) -> None:
    cases = make_cases(3)
    cases[1]["question"] += " [block]"
    write_dataset(tmp_path, cases)
    write_config(tmp_path, adapter={"type": "python", "target": "tiny_pipeline:TinySync", "timeout_s": 3})
    # The call blocks for an hour: were it waited for, the run would outlast ragproof()'s
    # timeout (TimeoutExpired fails the test); abandoned, the run exits well within it.
    proc = ragproof("run", "--out", "run", "--no-progress", cwd=tmp_path, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [r.status for r in read_artifact(tmp_path / "run").rows] == ["ok", "timeout", "ok"]


def test_command_pipeline_under_ragproof_run_cannot_read_the_tokens(tmp_path: Path) -> None:
    script = PIPELINES / "jsonl_pipeline.py"
    write_dataset(tmp_path, [{"id": "env", "question": "env: show me"}, {"id": "ok", "question": "ok: hi"}])
    write_config(
        tmp_path,
        adapter={"type": "command", "command": [sys.executable, str(script)], "methods": ["answer"]},
        judge={"api_key_env": "MY_JUDGE_KEY"},
    )
    secrets = {
        "GITHUB_TOKEN": "ghs_topsecret",
        "ACTIONS_RUNTIME_TOKEN": "rt_secret",
        "MY_JUDGE_KEY": "sk_secret",
    }
    proc = ragproof("run", "--out", "run", "--no-progress", cwd=tmp_path, env=_env(**secrets))
    assert proc.returncode == 0, proc.stderr
    artifact = read_artifact(tmp_path / "run")
    answer = artifact.rows[0].answer
    assert answer is not None
    seen = json.loads(answer.text)
    assert "PATH" in seen  # the process did get an environment ...
    assert not set(secrets) & set(seen)  # ... without the tokens
    rows_text = (tmp_path / "run" / "rows.jsonl").read_text()
    assert not any(value in rows_text for value in secrets.values())
    assert (
        "handling" in (tmp_path / "run" / "adapter-stderr.log").read_text()
    )  # its stderr, kept with the run


def test_progress_off_a_terminal_is_plain_lines(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(6))
    write_config(tmp_path)
    proc = ragproof("run", "-c", "ragproof.yaml", "--out", "run", cwd=tmp_path, env=_env(CI="true"))
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("ragproof: 6/6 cases (100%)")
    assert proc.stdout.startswith("complete: 6 cases in ")


def _stderr_on_a_terminal(tmp_path: Path, env: dict[str, str]) -> str:
    """``ragproof run`` with its stderr on a pseudo-terminal; what the terminal received."""
    import pty
    import threading

    controller, terminal = pty.openpty()
    received: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(controller, 65536)
            except OSError:  # the terminal side closed
                return
            if not data:
                return
            received.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = subprocess.run(
        [sys.executable, "-m", "gate", "run", "--out", "run"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=terminal,
        text=True,
        timeout=120,
    )
    os.close(terminal)
    reader.join(timeout=10)
    os.close(controller)
    assert proc.returncode == 0
    return b"".join(received).decode()


def test_progress_on_a_terminal_is_one_redrawn_bar_but_plain_lines_in_ci(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(6))
    write_config(tmp_path)
    on_terminal = _stderr_on_a_terminal(tmp_path, _env())
    assert "\r\x1b[2K[" + "#" * 28 + "] 6/6 cases (100%)" in on_terminal
    assert "ragproof: 6/6" not in on_terminal
    in_ci = _stderr_on_a_terminal(tmp_path, _env(CI="true"))
    assert "\x1b" not in in_ci and "\r\x1b" not in in_ci
    assert in_ci.strip().splitlines()[-1].startswith("ragproof: 6/6 cases (100%)")


def _one_line_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("ragproof: error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        (
            "dataset: cases.jsonl\nadapter: {type: python, target: 'm:a', concurency: 4}\n",
            "adapter.concurency: unknown key",
        ),
        (
            "dataset: cases.jsonl\nadapter: {type: python, target: 'm:a'}\nrun: {k: five}\n",
            "run.k: Input should be a valid integer",
        ),
        ("adapter: {type: python, target: 'm:a'}\n", "dataset: Field required"),
        ("dataset: cases.jsonl\n", "adapter: Field required"),
        ("dataset: cases.jsonl\nadapter: {type: http}\n", "adapter.type 'http' needs adapter.url"),
        ("dataset: [unclosed\n", "ragproof.yaml:2"),
    ],
)
@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_config_is_one_line_and_exit_64(
    tmp_path: Path, yaml_text: str, expected: str, command: str
) -> None:
    (tmp_path / "ragproof.yaml").write_text(yaml_text)
    write_dataset(tmp_path, make_cases(2))
    line = _one_line_error(ragproof(command, "-c", "ragproof.yaml", cwd=tmp_path, env=_env()), 64)
    assert "ragproof.yaml" in line and expected in line


@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_dataset_is_one_line_and_exit_65(tmp_path: Path, command: str) -> None:
    write_config(tmp_path)
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "question": "q"}\n{"id": "b", "question": \n')
    line = _one_line_error(ragproof(command, "-c", "ragproof.yaml", cwd=tmp_path, env=_env()), 65)
    assert "cases.jsonl:2: malformed JSON" in line


def _validate(tmp_path: Path, **config: Any) -> subprocess.CompletedProcess[str]:
    """``ragproof validate`` on the dataset already in ``tmp_path`` and a config from ``config``."""
    write_config(tmp_path, **config)
    return ragproof("validate", cwd=tmp_path, env=_env())


def test_unknown_metric_is_exit_64(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(2))
    line = _one_line_error(_validate(tmp_path, run={"metrics": ["retrieval.recal_at_k"]}), 64)
    assert "unknown metric 'retrieval.recal_at_k'" in line


def test_validate_imports_the_target_but_calls_no_method(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(5))
    log = tmp_path / "calls.log"
    (tmp_path / "recording.py").write_text(
        "import os\n"
        "def _log(what):\n"
        "    with open(os.environ['CALL_LOG'], 'a') as f:\n"
        "        f.write(what + '\\n')\n"
        "_log('import')\n"
        "class Pipe:\n"
        "    def __init__(self):\n"
        "        _log('init')\n"
        "    def retrieve(self, question, k):\n"
        "        _log('retrieve')\n"
        "        return []\n"
        "    def answer(self, question):\n"
        "        _log('answer')\n"
        "        return 'x'\n"
    )
    adapter = {"type": "python", "target": "recording:Pipe"}
    write_config(tmp_path, adapter=adapter)
    proc = ragproof("validate", cwd=tmp_path, env=_env(CALL_LOG=str(log)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: ragproof.yaml: 5 cases (dataset sha256 ")
    assert log.read_text() == "import\ninit\n"
    line = _one_line_error(_validate(tmp_path, adapter={"type": "python", "target": "recordin:Pipe"}), 64)
    assert "adapter.target: module 'recordin' not found" in line


def test_validate_checks_the_replay_file(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(3))
    replay = {"type": "replay", "path": "recorded.jsonl"}
    (tmp_path / "recorded.jsonl").write_text('{"id": "case-000", "answer": {"text": "x"}}\n{"id": "zzz"}\n')
    proc = _validate(tmp_path, adapter=replay)
    assert proc.returncode == 0, proc.stderr
    assert (
        "no recorded output for 2 case(s)" in proc.stderr
        and "1 recorded id(s) not in the dataset" in proc.stderr
    )
    (tmp_path / "recorded.jsonl").write_text('{"id": "case-000", "answer": {"txt": "x"}}\n')
    assert "recorded.jsonl:1: answer.text: Field required" in _one_line_error(
        _validate(tmp_path, adapter=replay), 65
    )


def _finished_run(tmp_path: Path) -> Path:
    write_dataset(tmp_path, make_cases(10))
    write_config(tmp_path)
    proc = ragproof("run", "--out", "run", "--no-progress", cwd=tmp_path, env=_env())
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "run"


def test_report_table_and_json(tmp_path: Path) -> None:
    run_dir = _finished_run(tmp_path)
    table = ragproof("report", "run", cwd=tmp_path, env=_env())
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("run ") and "(complete)" in lines[0]
    assert "[all]" in lines and "[kind=unanswerable]" in lines and "[tags=topic:refunds]" in lines
    recall = next(line for line in lines if line.startswith("retrieval.recall_at_k"))
    assert recall.split()[1:] == ["1.0000", "1.0000", "1.0000", "8", "2", "0", "0"]
    summary = read_artifact(run_dir).summary.slices["all"]["diagnostics.failure_category"]
    assert summary.distribution
    expected = ", ".join(f"{label}={count}" for label, count in sorted(summary.distribution.items()))
    assert f"  diagnostics.failure_category: {expected}" in lines
    as_json = ragproof("report", "run", "--json", cwd=tmp_path, env=_env())
    document = json.loads(as_json.stdout)
    assert document["summary"] == json.loads((run_dir / "summary.json").read_text())
    assert document["run"]["run_id"] == read_artifact(run_dir).meta.run_id


def test_report_lists_the_metric_names_run_metrics_accepts(tmp_path: Path) -> None:
    from gate.run.scoring import select_metrics

    proc = ragproof("report", "--list-metrics", cwd=tmp_path, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()] == select_metrics("all")
    assert "give a RUN" in _one_line_error(ragproof("report", cwd=tmp_path, env=_env()), 64)


def test_report_html(tmp_path: Path) -> None:
    _finished_run(tmp_path)
    proc = ragproof("report", "run", "--html", "report.html", cwd=tmp_path, env=_env())
    try:
        import gate.report.html  # noqa: F401
    except ModuleNotFoundError:
        assert "HTML report is not available" in _one_line_error(proc, 64)
    else:
        assert proc.returncode == 0, proc.stderr
        assert "<html" in (tmp_path / "report.html").read_text().lower()


def test_bad_artifacts_are_one_line_and_exit_65(tmp_path: Path) -> None:
    run_dir = _finished_run(tmp_path)
    rows = (run_dir / "rows.jsonl").read_text().splitlines()
    rows[3] = rows[3].replace('"status":"ok"', '"status":"fine"')
    (run_dir / "rows.jsonl").write_text("\n".join(rows) + "\n")
    line = _one_line_error(ragproof("report", "run", cwd=tmp_path, env=_env()), 65)
    assert "run/rows.jsonl:4: status: Input should be 'ok', 'adapter_error' or 'timeout'" in line

    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr("../outside.txt", "x")
        archive.writestr("run.json", "{}")
    assert "unsafe zip entry '../outside.txt'" in _one_line_error(
        ragproof("report", "evil.zip", cwd=tmp_path, env=_env()), 65
    )
    assert not (tmp_path.parent / "outside.txt").exists()

    assert "run artifact not found" in _one_line_error(
        ragproof("report", "nope", cwd=tmp_path, env=_env()), 65
    )


def test_merge_via_cli_and_refusal_of_disagreeing_parts(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(12))
    write_config(tmp_path)
    for i in (1, 2):
        proc = ragproof(
            "run", "--shard", f"{i}/2", "--out", f"part{i}", "--no-progress", cwd=tmp_path, env=_env()
        )
        assert proc.returncode == 0, proc.stderr
    merged = ragproof("merge", "part1", "part2", "--out", "merged", cwd=tmp_path, env=_env())
    assert merged.returncode == 0, merged.stderr
    assert merged.stdout.startswith("complete: merged 2 parts, 12 cases")
    assert [r.position for r in read_artifact(tmp_path / "merged").rows] == list(range(12))

    write_config(tmp_path, run={"k": 2})
    proc = ragproof("run", "--shard", "2/2", "--out", "other", "--no-progress", cwd=tmp_path, env=_env())
    assert proc.returncode == 0, proc.stderr
    line = _one_line_error(ragproof("merge", "part1", "other", "--out", "bad", cwd=tmp_path, env=_env()), 65)
    assert "other: config hash differs from part1's" in line
    line = _one_line_error(ragproof("merge", "part1", "part1", "--out", "bad", cwd=tmp_path, env=_env()), 65)
    assert "shard 1 also given as part1" in line


def test_run_estimate_hook(tmp_path: Path) -> None:
    write_dataset(tmp_path, make_cases(2))
    write_config(tmp_path)
    proc = ragproof("run", "--estimate", cwd=tmp_path, env=_env())
    try:
        import gate.run.estimate  # noqa: F401
    except ModuleNotFoundError:
        assert "cost estimation is not available" in _one_line_error(proc, 64)
    else:
        assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / ".ragproof" / "run").exists()  # estimating runs nothing


def test_bundled_demo_runs_offline(tmp_path: Path) -> None:
    demo = Path(__file__).resolve().parents[2] / "examples" / "demo" / "ragproof.yaml"
    if not demo.exists():
        pytest.skip("examples/demo/ragproof.yaml not present")
    proc = ragproof(
        "run", "-c", str(demo), "--out", str(tmp_path / "demo-run"), "--no-progress", cwd=tmp_path, env=_env()
    )
    assert proc.returncode == 0, proc.stderr
    artifact = read_artifact(tmp_path / "demo-run")
    assert artifact.meta.status == "complete" and len(artifact.rows) >= 80
    assert artifact.summary.failures == 0


def _failing_run(tmp_path: Path, **run: Any) -> subprocess.CompletedProcess[str]:
    """10 cases: 5 raise, 3 succeed, 2 hang past the timeout.

    The hanging cases come last and the timeout is far above what a healthy call takes on a
    loaded machine: a timeout kills the worker, and a healthy case still in flight or started
    after it (on a fresh worker, whose start counts against the case's time) would otherwise
    time out too and change the counts."""
    cases = make_cases(10)
    for i, case in enumerate(cases):
        if i < 5:
            case["question"] += " [fail]"
        elif i >= 8:
            case["question"] += " [hang]"
    write_dataset(tmp_path, cases)
    adapter = {"type": "python", "target": "tiny_pipeline:Tiny", "concurrency": 4, "timeout_s": 3}
    write_config(tmp_path, adapter=adapter, run=run)
    return ragproof("run", "--out", "run", "--no-progress", cwd=tmp_path, env=_env())


def test_a_run_that_mostly_failed_exits_4_with_its_commonest_errors(tmp_path: Path) -> None:
    # Formerly "complete", exit 0, and the errors only in rows.jsonl.
    proc = _failing_run(tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert proc.stdout.startswith("complete: 10 cases, 7 failed")
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("ragproof: warning:")]
    assert errors == [
        "ragproof: error: 7 of 10 cases failed: adapter-failure rate 0.7000 exceeds run.max_failure_rate 0.5; "
        "the most common errors:",
        "  5 × adapter_error: retrieve raised RuntimeError: index offline",
        "  2 × timeout: no result within 3 s",
    ]
    assert read_artifact(tmp_path / "run").meta.status == "complete"  # the artifact is written

    table = ragproof("report", "run", cwd=tmp_path, env=_env()).stdout.splitlines()
    at = table.index("errors (cases × status: message):")
    assert table[at + 1 : at + 3] == [
        "  5 × adapter_error: retrieve raised RuntimeError: index offline",
        "  2 × timeout: no result within 3 s",
    ]
    document = json.loads(ragproof("report", "run", "--json", cwd=tmp_path, env=_env()).stdout)
    assert document["errors"] == [
        {"message": "adapter_error: retrieve raised RuntimeError: index offline", "count": 5},
        {"message": "timeout: no result within 3 s", "count": 2},
    ]
    html = ragproof("report", "run", "--html", "r.html", cwd=tmp_path, env=_env())
    assert html.returncode == 0, html.stderr
    page = (tmp_path / "r.html").read_text()
    assert (
        '<tr><td class="num">5</td><td>adapter_error: retrieve raised RuntimeError: index offline</td></tr>'
        in page
    )


def test_a_run_with_30_percent_failed_says_so_everywhere_a_baseline_is_read(tmp_path: Path) -> None:
    # Formerly exit 0 and silence, while the failed cases left the means looking better.
    cases = make_cases(10)
    for case in cases[:3]:
        case["question"] += " [fail]"
    write_dataset(tmp_path, cases)
    write_config(tmp_path)
    proc = ragproof("run", "--out", "base", "--no-progress", cwd=tmp_path, env=_env())
    assert proc.returncode == 0, proc.stderr
    warning = (
        "3 of 10 cases failed (30%, above 10%; most often 'adapter_error: retrieve raised RuntimeError: "
        "index offline', 3x): failed cases enter no mean, so the means describe only the 7 that ran and "
        "can look better than the pipeline is"
    )
    assert f"ragproof: warning: {warning}\n" in proc.stderr
    assert read_artifact(tmp_path / "base").meta.warnings[0] == warning
    report = ragproof("report", "base", cwd=tmp_path, env=_env())
    assert f"warning: {warning}\n" in report.stdout

    for case in cases:
        case["question"] = case["question"].replace(" [fail]", "")
    write_dataset(tmp_path, cases)
    assert ragproof("run", "--out", "cand", "--no-progress", cwd=tmp_path, env=_env()).returncode == 0
    ragproof("compare", "base", "cand", "--markdown", "comment.md", cwd=tmp_path, env=_env())
    comment = (tmp_path / "comment.md").read_text()  # markdown-escaped
    assert "> ⚠️ baseline run: 3 of 10 cases failed \\(30%, above 10%; most often 'adapter\\_error:" in comment

    # one failure in ten is at the warning level, not above it
    cases[0]["question"] += " [fail]"
    write_dataset(tmp_path, cases)
    quiet = ragproof("run", "--out", "one", "--no-progress", cwd=tmp_path, env=_env())
    assert (quiet.returncode, "failed" in quiet.stderr) == (0, False)


def test_a_failure_rate_within_run_max_failure_rate_exits_0(tmp_path: Path) -> None:
    proc = _failing_run(tmp_path, max_failure_rate=0.7)
    assert proc.returncode == 0, proc.stderr
    assert "most common errors" not in proc.stderr
