"""Run a dataset through the adapter, score every case, write a run artifact.

Flow of :func:`execute_run`: load the dataset; keep this shard's cases; open the store and
(when resuming) take the rows it already holds; build the judge and the adapter; run the
remaining cases on one event loop with at most ``adapter.concurrency`` in flight; score each
finished case; commit it to the store; write ``run.json``/``rows.jsonl``/``summary.json``.

- Each case gets ``adapter.timeout_s`` in all (retries included); past it the row is a
  ``timeout``. Adapter failures are ``adapter_error`` rows; neither is scored.
- Rows are written in dataset order, whatever order the cases finish in.
- ``latency_ms`` is the adapter's time for the case (scoring excluded).
- SIGINT/SIGTERM: no new case starts, cases in flight are dropped (they are re-run on
  resume), the finished rows are written with status ``partial`` and the exit code is
  128 + the signal number.
- ``BudgetExceeded`` from the judge: the same graceful stop with status ``aborted:budget``
  and exit code 2.
- Shards: case ``c`` belongs to shard ``int(sha256(c.id)[:8 bytes]) mod N + 1``, stable across
  machines and Python versions (unlike ``hash()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gate import __version__
from gate.adapters import STDERR_LOG_NAME, Adapter, AdapterError, AdapterTimeout, build_adapter
from gate.boundary.sandbox import end_untrusted_processes
from gate.core.environment import Environment
from gate.core.errors import (
    EXIT_BUDGET,
    EXIT_FAILURE_RATE,
    EXIT_OK,
    BudgetExceeded,
    RagproofError,
    UsageError,
)
from gate.judge.session import JudgeSession, build_judge
from gate.metrics import registry
from gate.metrics.aggregate import summarize
from gate.metrics.base import ScoringContext
from gate.model.artifact import (
    RUN_FILE,
    CostInfo,
    DatasetInfo,
    JudgeInfo,
    Row,
    RowStatus,
    RunArtifact,
    RunMeta,
    RunStatus,
    ShardInfo,
    ToolInfo,
    error_groups,
)
from gate.model.config import Config
from gate.model.dataset import Case, Dataset, load_dataset
from gate.model.records import MetricResult
from gate.run.artifact_io import check_out_dir, new_run_id, read_artifact, utc_now, write_artifact
from gate.run.checks import run_warnings
from gate.run.gitinfo import git_info
from gate.run.progress import Progress
from gate.run.scoring import select_metrics
from gate.run.scoring_workers import InlineScorer, make_scorer
from gate.run.shards import Shard, in_shard
from gate.run.store import Store, run_key

MAX_ERROR_CHARS = 2000


@dataclass
class RunOutcome:
    artifact_dir: Path
    status: RunStatus
    exit_code: int
    meta: RunMeta
    cases: int = 0  # rows written
    failures: int = 0  # rows with status other than ok
    # the failed rows' messages with their counts, most frequent first (error_groups)
    errors: list[tuple[str, int]] = field(default_factory=list)
    loop_s: float = 0.0  # time spent running this invocation's cases (setup and writing excluded)


def store_path(config: Config, env: Environment) -> Path:
    """``run.store``, relative to the working directory."""
    path = Path(config.run.store)
    return path if path.is_absolute() else env.cwd / path


def adapter_description(config: Config) -> dict[str, Any]:
    """The adapter's settings for run.json: its identity, and how it is called (no headers:
    they may hold credentials)."""
    adapter = config.adapter
    described = config.adapter_identity()
    if adapter.type != "replay":
        described.update(
            concurrency=adapter.concurrency, timeout_s=adapter.timeout_s, retries=adapter.retries
        )
    return described


# -- resume ------------------------------------------------------------------------------


@dataclass
class _Resumed:
    run_id: str
    rows: dict[str, Row] = field(default_factory=dict)


def _resume_from(resume: Path, store: Store, plan: RunPlan) -> _Resumed:
    """The run to continue: its id and finished rows, from the store or else from its artifact."""
    found = store.latest_run_for(resume)
    artifact: RunArtifact | None = None
    if found is None and (resume / RUN_FILE).is_file():
        artifact = read_artifact(resume)
        stored_key = store.run_key_of(artifact.meta.run_id)
        if stored_key is not None:
            found = (artifact.meta.run_id, stored_key)
    if found is not None:
        run_id, stored_key = found
        if stored_key != plan.key:
            raise _refusal(resume, artifact, plan.adapter_identity)
        return _Resumed(
            run_id, {cid: Row.model_validate_json(text) for cid, text in store.results(run_id).items()}
        )
    if artifact is None:
        raise UsageError(
            f"--resume {resume}: no run of that directory in {store.path} and no {RUN_FILE} in it"
        )
    # The store is gone (another machine): the artifact's own rows are the finished cases.
    meta = artifact.meta
    shard = (meta.shard.index, meta.shard.count) if meta.shard else None
    if run_key(meta.dataset.sha256, meta.config_hash, shard) != plan.key:
        raise _refusal(resume, artifact, plan.adapter_identity)
    return _Resumed(artifact.meta.run_id, {r.case_id: r for r in artifact.rows})


def _pipeline(identity: dict[str, Any]) -> str:
    """``python target pkg.rag:make`` / ``http url ...`` / ``command python -m x`` / ``replay path ...``."""
    kind = str(identity.get("type"))
    field = next((f for f in ("target", "url", "command", "path") if f in identity), None)
    if field is None:
        return kind
    value = identity[field]
    shown = " ".join(map(str, value)) if isinstance(value, list) else str(value)
    return f"{kind} {field} {shown}"


def _refusal(resume: Path, artifact: RunArtifact | None, now: dict[str, Any]) -> UsageError:
    """One line saying why the run in ``resume`` cannot be continued by this one.

    The artifact (read here when the store alone knew the run) tells another pipeline apart
    from another dataset or config; without it the line names what the run key covers.
    """
    if artifact is None and (resume / RUN_FILE).is_file():
        with contextlib.suppress(RagproofError):
            artifact = read_artifact(resume)
    then = {k: v for k, v in artifact.meta.adapter.items() if k in now} if artifact is not None else {}
    if then and then != now:
        what = f"that run called another pipeline ({_pipeline(then)}; this config: {_pipeline(now)})"
    else:
        what = "the dataset, config (adapter included) or shard changed since that run"
    return UsageError(
        f"--resume {resume}: {what}; its rows cannot be mixed with this run's, start a new run instead"
    )


# -- the event loop ----------------------------------------------------------------------


@dataclass
class _LoopResult:
    stop_reason: str | None = None  # None (finished), "budget", or "signal"
    signal_number: int | None = None
    failure: BaseException | None = None


class _CaseRunner:
    """Runs one case through adapter and metrics; knows nothing of the store or progress."""

    def __init__(self, adapter: Adapter, k: int, timeout_s: float, scorer: InlineScorer) -> None:
        self._adapter = adapter
        self._k = k
        self._timeout_s = timeout_s
        self._scorer = scorer

    async def run(self, position: int, case: Case) -> Row:
        started = time.perf_counter()
        output = None
        status: RowStatus = "ok"
        error: str | None = None
        try:
            async with asyncio.timeout(self._timeout_s):
                output = await self._adapter.run_case(case, self._k)
        except TimeoutError:
            status, error = "timeout", f"no result within {self._timeout_s:g} s"
        except AdapterTimeout as exc:
            status, error = "timeout", str(exc)
        except AdapterError as exc:
            status, error = "adapter_error", str(exc) or type(exc).__name__
        latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        metrics: dict[str, MetricResult] = {}
        if output is not None:
            metrics = await self._scorer.score(case, output)
        return Row.of(
            case,
            output,
            metrics,
            position=position,
            status=status,
            error=error[:MAX_ERROR_CHARS] if error else None,
            latency_ms=latency_ms,
        )


async def _run_loop(
    adapter: Adapter,
    case_runner: _CaseRunner,
    pending: list[tuple[int, Case]],
    concurrency: int,
    on_row: Callable[[Row], None],
    tick: Callable[[], None],
    tick_s: float,
) -> _LoopResult:
    loop = asyncio.get_running_loop()
    result = _LoopResult()
    stop = asyncio.Event()

    def on_signal(signum: int) -> None:
        if result.stop_reason is None:
            result.stop_reason, result.signal_number = "signal", signum
        stop.set()

    handled: list[int] = []
    for signum in (int(signal.SIGINT), int(signal.SIGTERM)):
        try:
            loop.add_signal_handler(signum, on_signal, signum)
            handled.append(signum)
        except (ValueError, RuntimeError, NotImplementedError):
            pass  # not the main thread: the caller handles interruption

    queue = iter(pending)

    async def worker() -> None:
        for position, case in queue:
            if stop.is_set():
                return
            try:
                row = await case_runner.run(position, case)
                on_row(row)
            except BudgetExceeded:
                if result.stop_reason is None:
                    result.stop_reason = "budget"
                stop.set()
                return
            except Exception as exc:  # a bug or a broken store: stop, keep what is committed
                if result.failure is None:
                    result.failure = exc
                stop.set()
                return

    async def ticker() -> None:
        while True:
            await asyncio.sleep(tick_s)
            tick()

    ticking = asyncio.create_task(ticker())
    try:
        await adapter.start()
        workers = [asyncio.create_task(worker()) for _ in range(max(1, min(concurrency, len(pending))))]
        all_done = asyncio.gather(*workers)
        stopped = asyncio.create_task(stop.wait())
        racing: list[asyncio.Future[Any]] = [all_done, stopped]
        await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        if not all_done.done():
            for task in workers:
                task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        stopped.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await all_done  # retrieve its outcome (the cancellation) so none is left unobserved
    finally:
        ticking.cancel()
        for signum in handled:
            loop.remove_signal_handler(signum)
        await adapter.close()
    return result


# -- the run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPlan:
    """What one invocation runs: this shard's cases of the dataset, the metrics, the store key."""

    dataset: Dataset
    cases: list[tuple[int, Case]]  # (position in the dataset, case)
    metric_names: list[str]
    config_hash: str
    key: str  # the store's run key: dataset, config (the adapter's identity included) and shard
    db_path: Path
    adapter_identity: dict[str, Any] = field(default_factory=dict)  # which pipeline is called


def plan_run(
    config: Config, env: Environment, shard: Shard | None, dataset: Dataset | None = None
) -> RunPlan:
    """Load the dataset (unless given) and keep this shard's cases; DataError/UsageError for bad input."""
    if dataset is None:
        dataset = load_dataset(config.resolve(config.dataset), config.dataset_version)
    config_hash = config.config_hash()
    return RunPlan(
        dataset=dataset,
        cases=[(position, case) for position, case in enumerate(dataset.cases) if in_shard(case.id, shard)],
        metric_names=select_metrics(config.run.metrics),
        config_hash=config_hash,
        key=run_key(dataset.sha256, config_hash, shard),
        db_path=store_path(config, env),
        adapter_identity=config.adapter_identity(),
    )


def execute_run(
    config: Config,
    env: Environment,
    out_dir: Path,
    *,
    shard: Shard | None = None,
    no_cache: bool = False,
    resume: Path | None = None,
    progress: bool = True,
    dataset: Dataset | None = None,
) -> RunOutcome:
    """Run ``config``'s dataset (this shard's part) and write the artifact to ``out_dir``.

    ``dataset`` replaces the one ``config.dataset`` names (the action runs a pull request on
    its baseline's cases). The artifact carries the cases (``dataset.jsonl``) and the
    resolved configuration (``run.json`` ``config``).

    ``resume`` names an earlier run's output directory: its finished cases are taken from the
    store (or its artifact) and only the others run. Returns the artifact directory, status
    and exit code (0 complete, 2 aborted:budget, 128 + signal when interrupted).
    """
    wall_start = time.monotonic()
    out_dir = Path(out_dir)
    check_out_dir(out_dir)
    plan = plan_run(config, env, shard, dataset)
    with contextlib.ExitStack() as cleanup:
        store = Store(plan.db_path)
        cleanup.callback(_quietly, store.close)
        run_id, rows_by_id = _restore(store, plan, resume, out_dir)
        judge = build_judge(config.judge, env, plan.db_path, not no_cache)
        if judge is not None:
            cleanup.callback(_quietly, judge.close)
        log_dir = plan.db_path.parent / "logs" / run_id
        loop_started = time.monotonic()
        outcome = _run_pending(config, env, plan, store, run_id, rows_by_id, judge, log_dir, progress)
        loop_s = time.monotonic() - loop_started
        # Nothing the pipeline started may still run while the artifact is written and its log
        # copied (in the action: every process of the pipeline user, those that left their
        # session included).
        end_untrusted_processes()
        status, exit_code = _final_status(outcome, len(rows_by_id), len(plan.cases))
        rows = [rows_by_id[case.id] for _, case in plan.cases if case.id in rows_by_id]
        warnings = _warnings(config, rows, [case for _, case in plan.cases], plan.metric_names)
        meta = _run_meta(
            config, env, plan, run_id, status, judge, shard, time.monotonic() - wall_start, warnings
        )
        summary = summarize(rows, plan.metric_names, list(config.gate.slices))
        artifact_dir = write_artifact(
            out_dir,
            meta,
            rows,
            summary,
            extra_files={STDERR_LOG_NAME: log_dir / STDERR_LOG_NAME},
            cases=plan.dataset.cases,
        )
    failures = sum(1 for row in rows if row.status != "ok")
    # A run that completed with most of its cases failed measured nothing: loud, not exit 0.
    if exit_code == EXIT_OK and rows and failures / len(rows) > config.run.max_failure_rate:
        exit_code = EXIT_FAILURE_RATE
    return RunOutcome(
        artifact_dir,
        status,
        exit_code,
        meta,
        cases=len(rows),
        failures=failures,
        loop_s=loop_s,
        errors=error_groups(rows),
    )


def _warnings(config: Config, rows: list[Row], cases: list[Case], metric_names: list[str]) -> list[str]:
    """End-of-run warnings (:func:`gate.run.checks.run_warnings`)."""
    specs = registry()
    return run_warnings(
        rows,
        {case.id: case for case in cases},
        [specs[name] for name in metric_names if name in specs],
        k=config.run.k,
        source_match=config.run.source_match,
        document_id_key=config.run.document_id_key,
    )


def _quietly(close: Callable[[], None]) -> None:
    # Closing after a failure must not replace the failure that is being raised.
    with contextlib.suppress(Exception):
        close()


def _restore(store: Store, plan: RunPlan, resume: Path | None, out_dir: Path) -> tuple[str, dict[str, Row]]:
    """The run id and the rows already finished (none unless resuming), recorded in the store."""
    resumed = _resume_from(resume, store, plan) if resume else _Resumed(new_run_id())
    wanted = {case.id for _, case in plan.cases}
    rows_by_id = {cid: row for cid, row in resumed.rows.items() if cid in wanted}
    store.begin_run(resumed.run_id, plan.key, out_dir)
    for cid, row in rows_by_id.items():
        store.add_result(resumed.run_id, cid, row.model_dump_json())
    store.flush()
    return resumed.run_id, rows_by_id


def _run_pending(
    config: Config,
    env: Environment,
    plan: RunPlan,
    store: Store,
    run_id: str,
    rows_by_id: dict[str, Row],
    judge: JudgeSession | None,
    log_dir: Path,
    progress: bool,
) -> _LoopResult:
    """Run the cases not in ``rows_by_id`` yet, adding each finished row there and to the store.

    Re-raises a failure of the loop itself (a bug, a broken store) after committing what finished.
    """
    ctx = ScoringContext(settings=config.run, judge=judge, composite_weights=config.composite_weights())
    adapter = build_adapter(config, env, log_dir)
    pending = [(position, case) for position, case in plan.cases if case.id not in rows_by_id]
    bar = (
        Progress(
            len(plan.cases),
            # CI keeps every byte of a log, even from a pseudo-terminal: plain lines there.
            tty=env.stderr_is_tty and not env.is_ci,
            already_done=len(plan.cases) - len(pending),
        )
        if progress
        else None
    )

    def tick() -> None:
        store.flush()
        if bar is not None:
            bar.tick()

    def on_row(row: Row) -> None:
        rows_by_id[row.case_id] = row
        store.add_result(run_id, row.case_id, row.model_dump_json())
        if bar is not None:
            bar.advance(failed=row.status != "ok")

    scorer = make_scorer(ctx, plan.metric_names, judge_threads=config.judge.concurrency)
    case_runner = _CaseRunner(adapter, config.run.k, config.adapter.timeout_s, scorer)
    try:
        outcome = asyncio.run(
            _run_loop(
                adapter, case_runner, pending, config.adapter.concurrency, on_row, tick, store.batch_seconds
            )
        )
    finally:
        store.flush()
        if bar is not None:
            bar.finish()
        scorer.close()
    if outcome.failure is not None:
        raise outcome.failure
    return outcome


def _final_status(outcome: _LoopResult, finished: int, planned: int) -> tuple[RunStatus, int]:
    """(status, exit code): budget stop 2, signal 128 + signum, cases missing → partial."""
    if outcome.stop_reason == "budget":
        return "aborted:budget", EXIT_BUDGET
    if outcome.stop_reason == "signal":
        return "partial", 128 + (outcome.signal_number or signal.SIGINT)
    return ("partial" if finished < planned else "complete"), EXIT_OK


def _run_meta(
    config: Config,
    env: Environment,
    plan: RunPlan,
    run_id: str,
    status: RunStatus,
    judge: JudgeSession | None,
    shard: Shard | None,
    wall_time_s: float,
    warnings: list[str],
) -> RunMeta:
    """``run.json`` of this run."""
    return RunMeta(
        run_id=run_id,
        created_at=utc_now(),
        tool=ToolInfo(version=__version__),
        git=git_info(env),
        dataset=DatasetInfo(
            path=config.dataset,
            sha256=plan.dataset.sha256,
            version=plan.dataset.version,
            case_count=len(plan.dataset),
        ),
        config_hash=plan.config_hash,
        k=config.run.k,
        source_match=config.run.source_match,
        document_id_key=config.run.document_id_key,
        ndcg_gain=config.run.ndcg_gain,
        metrics=plan.metric_names,
        slices=list(config.gate.slices),
        judge=judge.info() if judge is not None else JudgeInfo(),
        shard=ShardInfo(index=shard[0], count=shard[1]) if shard else None,
        status=status,
        cost=judge.cost() if judge is not None else CostInfo(),
        wall_time_s=round(wall_time_s, 3),
        adapter=adapter_description(config),
        warnings=warnings,
        config=config.recorded(),
    )


__all__ = ["RunOutcome", "RunPlan", "execute_run", "plan_run"]
