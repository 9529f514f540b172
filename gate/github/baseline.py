"""Finding the baseline run artifact on the default branch, and fetching run artifacts safely.

Which run is the baseline (all lists are paginated to the end or until found):

1. the repository's default branch (``GET /repos/{owner}/{repo}``);
2. the merge base of the default branch and the candidate's head commit (compare API);
3. the baseline workflow's runs that are trusted: ``event == "push"``, ``head_branch`` is the
   default branch, ``conclusion == "success"`` and ``head_repository`` is this repository
   (a run from a fork or a pull request is never a baseline, even on a branch named like the
   default: the server-side filters are only a first cut, every field is checked again here);
4. the **newest** trusted run with a usable artifact (:attr:`BaselineSearch.latest`): the
   default branch's current policy (gate settings, cases) is its, whatever the fork point;
5. the scores compared with: prefer a run at the merge-base commit; else the newest run whose
   commit is an ancestor of the merge base (checked with the compare API: ``status`` "ahead" or
   "identical"), with how many commits it is behind and how old it is noted for the report.
   Runs created before the merge-base commit's date are asked first (on a default branch that
   only moves forward, they are its ancestors): a pull request that forks from an old commit
   does not spend the search on the runs after it. The search asks at most
   :data:`MAX_ANCESTRY_CHECKS` commits (a cost bound, not a way out);
6. when the merge base has no usable baseline (the pull request forked before the first
   baseline, or the search ends), the newest one of step 4 is compared with, and the report
   says so (:attr:`BaselineSearch.fallback`): while the default branch has a usable baseline,
   a pull request always gets one;
7. in a run, the newest artifact with the given name that is not expired and belongs to that
   run of this repository; a run without one is passed over for the next candidate run;
8. the zip is downloaded (redirect followed without credentials) and read and validated in
   place with :func:`gate.run.artifact_io.read_artifact`, never extracted; each run is fetched
   at most once per search;
9. a refused artifact (unsafe or malformed data: the artifact is as hostile as any download)
   or a run that is no usable baseline (status not ``complete``, no rows, adapter-failure rate
   above ``run.max_failure_rate``: :meth:`gate.model.artifact.RunArtifact.unusable_as_baseline`)
   is skipped like an expired one, with a warning naming the run and the reason, and the
   search goes on with the next older run; none left is the no-baseline path.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gate.core.errors import DataError
from gate.github.client import GitHubAPIError, GitHubClient
from gate.github.models import Artifact, Commit, CommitComparison, Repository, WorkflowRun, parse_response
from gate.model.artifact import RunArtifact
from gate.model.config import RunConfig

MAX_DOWNLOAD_BYTES = 256 << 20
MAX_RUNS_SCANNED = 1_000
MAX_ANCESTRY_CHECKS = 30


@dataclass
class Baseline:
    """The chosen baseline: the run, its artifact and how far it is from the merge base."""

    artifact: RunArtifact
    run: WorkflowRun
    merge_base_sha: str | None  # None: the candidate shares no history with the default branch
    # 0: the run is at the merge-base commit; None: not an ancestor of it (the default branch's
    # newest baseline, taken because the merge base has none)
    commits_behind: int | None

    def age(self, now: datetime | None = None) -> timedelta:
        return (now or datetime.now(UTC)) - self.run.created_at

    def staleness(self, now: datetime | None = None) -> str:
        """One sentence for the report: which commit, how far behind, how old."""
        days = self.age(now).total_seconds() / 86400
        age = f"{days:.1f} days old" if days >= 1 else f"{days * 24:.1f} hours old"
        behind = self.commits_behind
        where = (
            (
                f"not an ancestor of the merge base {self.merge_base_sha[:7]}"
                if self.merge_base_sha
                else "the candidate shares no history with the default branch"
            )
            if behind is None
            else "at the merge base"
            if behind == 0
            else f"{behind} commit{'s' if behind != 1 else ''} behind the merge base {(self.merge_base_sha or '')[:7]}"
        )
        return f"baseline from run {self.run.id} at commit {self.run.head_sha[:7]} ({where}; {age})"


@dataclass
class BaselineSearch:
    """The outcome of a search: a baseline, or why there is none; notes for the report."""

    default_branch: str
    merge_base_sha: str | None
    baseline: Baseline | None = None  # the scores compared with
    # The newest usable trusted baseline of the default branch: its recorded policy applies.
    latest: Baseline | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    # runs passed over for a refused artifact or an unusable baseline (shown as warnings)
    warnings: list[str] = field(default_factory=list)

    @property
    def fallback(self) -> bool:
        """Whether the merge base had no usable baseline and the newest one is compared with."""
        return self.baseline is not None and self.baseline.commits_behind is None


def repository_info(client: GitHubClient) -> Repository:
    return parse_response(Repository, client.call("repos.get", permission="contents: read"), "repository")


def compare(client: GitHubClient, base: str, head: str) -> CommitComparison:
    data = client.call(
        "repos.compare_commits", permission="contents: read", basehead=f"{base}...{head}", per_page=1
    )
    return parse_response(CommitComparison, data, f"compare {base}...{head}")


def _same_repository(candidate: Repository | None, repository: Repository) -> bool:
    if candidate is None:
        return False
    if candidate.id is not None and repository.id is not None:
        return candidate.id == repository.id
    if candidate.full_name is None or repository.full_name is None:
        return False  # nothing to tell them apart by: never trusted
    return candidate.full_name.lower() == repository.full_name.lower()


def is_trusted_baseline_run(run: WorkflowRun, repository: Repository, default_branch: str) -> bool:
    """A successful push run on the default branch of this repository (not a fork, not a PR)."""
    return (
        run.event == "push"
        and run.head_branch == default_branch
        and run.conclusion == "success"
        and _same_repository(run.head_repository, repository)
        and (run.repository is None or _same_repository(run.repository, repository))
    )


def find_run_artifact(
    client: GitHubClient, run: WorkflowRun, name: str, *, repository_id: int | None, notes: list[str]
) -> Artifact | None:
    """The newest unexpired artifact called ``name`` of ``run`` (all pages searched)."""
    best: Artifact | None = None
    for item in client.paginate(
        "actions.list_workflow_run_artifacts",
        permission="actions: read",
        item_key="artifacts",
        run_id=run.id,
        name=name,
    ):
        artifact = parse_response(Artifact, item, f"artifacts of run {run.id}")
        if artifact.name != name:
            continue
        origin = artifact.workflow_run
        if origin is not None and origin.id is not None and origin.id != run.id:
            continue
        if (
            origin is not None
            and repository_id is not None
            and origin.repository_id not in (None, repository_id)
        ):
            continue
        if artifact.expired:
            notes.append(f"skipped expired artifact {name!r} (id {artifact.id}) of run {run.id}")
            continue
        if best is None or (artifact.created_at or datetime.min.replace(tzinfo=UTC)) > (
            best.created_at or datetime.min.replace(tzinfo=UTC)
        ):
            best = artifact
    return best


def fetch_artifact(client: GitHubClient, artifact: Artifact, work_dir: Path, *, label: str) -> RunArtifact:
    """Download and validate one run artifact (untrusted data), never extracting it.

    :func:`gate.model.artifact.read_artifact` reads the run's files straight from the zip, refusing
    absolute names, ``..``, links, too many entries and oversized members (the decompressed
    stream is capped, whatever the headers declare), so nothing from the archive touches the
    disk; the zip itself is deleted once read.
    """
    from gate.run.artifact_io import read_artifact

    work_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"artifact-{artifact.id}-", dir=work_dir))
    archive = scratch / "artifact.zip"
    try:
        client.download_artifact(artifact.id, archive, max_bytes=MAX_DOWNLOAD_BYTES)
        return read_artifact(archive)
    except DataError as exc:
        # The scratch zip's path means nothing to the reader (and is gone): name the artifact,
        # keeping the file and line within it ("ZIP: problem" or "ZIP/rows.jsonl:3: problem").
        message = str(exc)
        for prefix in (f"{archive}: ", f"{archive}/"):
            message = message.removeprefix(prefix)
        raise DataError(f"{label}: {message}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _trusted_runs(
    client: GitHubClient,
    repository: Repository,
    default_branch: str,
    workflow: str,
    *,
    head_sha: str | None = None,
) -> Iterator[WorkflowRun]:
    params: dict[str, object] = {"branch": default_branch, "event": "push", "status": "success"}
    if head_sha:
        params["head_sha"] = head_sha
    for count, item in enumerate(
        client.paginate(
            "actions.list_workflow_runs",
            permission="actions: read",
            item_key="workflow_runs",
            workflow_id=workflow,
            **params,
        )
    ):
        if count >= MAX_RUNS_SCANNED:
            return
        run = parse_response(WorkflowRun, item, f"runs of {workflow}")
        if is_trusted_baseline_run(run, repository, default_branch) and (
            head_sha is None or run.head_sha == head_sha
        ):
            yield run


def _recorded_limit(run: RunArtifact) -> float:
    """``run.max_failure_rate`` as the run recorded it, else the default."""
    default = RunConfig.model_fields["max_failure_rate"].default
    section = (run.meta.config or {}).get("run")
    value = section.get("max_failure_rate") if isinstance(section, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return float(default)


def find_baseline(
    client: GitHubClient,
    *,
    head_sha: str,
    workflow: str,
    artifact_name: str,
    work_dir: Path,
    repository: Repository | None = None,
) -> BaselineSearch:
    """Search the baseline for a candidate at ``head_sha`` (see the module docstring)."""
    repository = repository or repository_info(client)
    default_branch = repository.default_branch or "main"
    unrelated = f"commit {head_sha[:7]} shares no history with {default_branch}"
    merge_base_commit: Commit | None
    try:
        merge_base_commit = compare(client, default_branch, head_sha).merge_base_commit
    except GitHubAPIError as exc:
        if exc.status != 404:
            raise
        merge_base_commit = None  # no merge base: the newest baseline still applies
    merge_base = merge_base_commit.sha if merge_base_commit is not None else None
    search = BaselineSearch(default_branch, merge_base)
    loaded: dict[int, RunArtifact | None] = {}  # by run id: each run fetched (and warned of) once

    def load(run: WorkflowRun) -> RunArtifact | None:
        if run.id not in loaded:
            loaded[run.id] = _load_baseline(client, run, artifact_name, repository, work_dir, search)
        return loaded[run.id]

    def runs(at: str | None = None) -> Iterator[WorkflowRun]:
        return _trusted_runs(client, repository, default_branch, workflow, head_sha=at)

    try:
        newest = next(((run, art) for run in runs() if (art := load(run)) is not None), None)
        if newest is None and merge_base is None:
            search.reason = unrelated
            return search
        if newest is None:
            search.reason = (
                # none at all on the default branch, so none at or before the merge base either
                f"no successful push run of {workflow} on {default_branch} at or before the merge base "
                f"{(merge_base or '')[:7]} has an unexpired artifact {artifact_name!r}"
                + (
                    f" that is a usable baseline ({len(search.warnings)} skipped: see the warnings)"
                    if search.warnings
                    else ""
                )
            )
            return search
        latest_run, latest_artifact = newest
        search.latest = Baseline(
            latest_artifact, latest_run, merge_base, 0 if latest_run.head_sha == merge_base else None
        )
        if latest_run.head_sha == merge_base or merge_base_commit is None:
            if merge_base_commit is None:
                search.notes.append(f"{unrelated}: compared with its newest baseline")
            search.baseline = search.latest
            return search
        for run in runs(merge_base):
            if (artifact := load(run)) is not None:
                search.baseline = Baseline(artifact, run, merge_base, 0)
                return search
        search.baseline = _nearest_ancestor(client, runs(), merge_base_commit, load, search.notes)
    except GitHubAPIError as exc:
        if exc.status == 404 and "/actions/workflows/" in exc.endpoint:
            search.reason = (
                f"workflow {workflow!r} was not found on {default_branch} "
                "(set the baseline-workflow input, or grant `permissions: actions: read`)"
            )
            return search
        raise
    if search.baseline is None:
        # Never "no baseline" while the default branch has one: the newest is compared with.
        search.baseline = Baseline(latest_artifact, latest_run, merge_base, None)
    return search


def _load_baseline(
    client: GitHubClient,
    run: WorkflowRun,
    artifact_name: str,
    repository: Repository,
    work_dir: Path,
    search: BaselineSearch,
) -> RunArtifact | None:
    """The run's artifact when it is a usable baseline, else None with a note or warning why."""
    artifact = find_run_artifact(client, run, artifact_name, repository_id=repository.id, notes=search.notes)
    if artifact is None:
        search.notes.append(f"run {run.id} at {run.head_sha[:7]} has no usable artifact {artifact_name!r}")
        return None
    label = f"baseline artifact {artifact_name!r} of run {run.id}"
    try:
        loaded = fetch_artifact(client, artifact, work_dir, label=label)
    except DataError as exc:
        search.warnings.append(f"skipped {exc}")
        return None
    # The limit is the baseline run's own (run.max_failure_rate in its recorded config),
    # never the pull request's, which could set it to admit a failed baseline.
    unusable = loaded.unusable_as_baseline(_recorded_limit(loaded))
    if unusable is not None:
        search.warnings.append(f"skipped {label}: not a usable baseline: {unusable}")
        return None
    return loaded


def _nearest_ancestor(
    client: GitHubClient,
    runs: Iterator[WorkflowRun],
    merge_base: Commit,
    load: Callable[[WorkflowRun], RunArtifact | None],
    notes: list[str],
) -> Baseline | None:
    """The newest run at an ancestor of the merge base with a usable artifact, or None.

    Runs created before the merge-base commit's date are asked first (newest first), the
    others after: a fork point far back makes the runs after it wait, not spend the search.
    """
    when = merge_base.commit.committer.date if merge_base.commit and merge_base.commit.committer else None
    others = [run for run in runs if run.head_sha != merge_base.sha]  # at the merge base: tried
    before = [run for run in others if when is None or run.created_at <= when]
    ordered = before + [run for run in others if when is not None and run.created_at > when]
    checked: dict[str, CommitComparison | None] = {}
    for run in ordered:
        # Another run at a commit already checked (one was skipped): no second compare call.
        if run.head_sha not in checked:
            if len(checked) >= MAX_ANCESTRY_CHECKS:
                notes.append(f"stopped after checking {MAX_ANCESTRY_CHECKS} older commits")
                return None
            try:
                checked[run.head_sha] = compare(client, run.head_sha, merge_base.sha)
            except GitHubAPIError as exc:
                if exc.status != 404:
                    raise
                checked[run.head_sha] = None
        relation = checked[run.head_sha]
        # "ahead": the merge base is ahead of the run's commit, so that commit is an ancestor.
        if relation is not None and relation.status in ("ahead", "identical"):
            artifact = load(run)
            if artifact is not None:
                return Baseline(artifact, run, merge_base.sha, relation.ahead_by)
    return None
