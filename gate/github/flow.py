"""What ``ragproof action`` does for each event (the orchestration of one step).

Targets, decided from the event in ``auto`` mode:

- ``push`` to the default branch, or ``mode: run``: run the pipeline into ``out``, set the
  outputs, write the job summary; no comparison, no comment, no check (the workflow's next
  step uploads ``out`` as the baseline artifact).
- ``pull_request``: run (or take ``candidate``), find the baseline for the PR's head commit
  (``pull_request.head.sha``, not the merge commit), compare, upsert the comment, create the
  check run on the head commit, write summary and outputs, exit per ``fail-on``.
- ``workflow_dispatch`` with ``pr-number``: the same for that PR (head from the pulls API);
  without it (and ``push`` to another branch): compare with the default branch, summary only.
- ``workflow_run``: the candidate is the named artifact of the triggering run (untrusted data,
  validated); the PR is found from the run and must still have that head commit. A refused
  candidate artifact still gets its comment, a failing check, the summary and the outputs;
  the step then exits 65 with the reason.

No baseline: the comment shows the absolute scores, says there is no baseline yet and how to
make one; the check is neutral (nothing to protect yet) and the step passes. Runs that cannot
be compared exit 3.

Trust (docs/action.md "Security model"): ``pull_request_target`` is refused unless allowed;
a dispatch for a fork's pull request runs no code; the checkout's HEAD must be the pull
request's head commit before any pipeline (or ``install``) runs, and the check goes on that
commit; the policy, dataset and judge come from the baseline (:mod:`gate.github.policy`);
a ``workflow_run`` candidate must come from the configured workflow file and is re-scored from
its raw outputs; a maintainer's accept label turns review or block into a success
(:mod:`gate.github.accept`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.environment import Environment
from gate.core.errors import (
    EXIT_FAILED,
    EXIT_FAILURE_RATE,
    EXIT_NOT_COMPARABLE,
    EXIT_OK,
    DataError,
    NotComparableError,
    RagproofError,
    UsageError,
)
from gate.decision.decide import Outcome, exit_code_for
from gate.github.accept import (
    Acceptance,
    Trigger,
    carried_record,
    find_acceptance,
    recorded_acceptance,
    with_record,
)
from gate.github.baseline import (
    BaselineSearch,
    fetch_artifact,
    find_baseline,
    find_run_artifact,
    repository_info,
)
from gate.github.checks import (
    Conclusion,
    ReviewConclusion,
    conclusion_for,
    create_check_run,
    step_exit_code,
)
from gate.github.client import GitHubAPIError, GitHubClient
from gate.github.comment import find_comment, marker, write_comment
from gate.github.context import GitHubContext
from gate.github.models import IssueComment, PullRequest, Repository, WorkflowRun
from gate.github.policy import TrustedPolicy, judge_overrides, trusted_policy
from gate.github.pulls import get_pull, pull_for_run
from gate.github.workflow import WorkflowCommands
from gate.model.artifact import RunArtifact
from gate.model.config import Config

if TYPE_CHECKING:
    from gate.report.markdown import ReportContext

HOW_TO_MAKE_A_BASELINE = (
    "To make one, run this workflow on a push to the default branch with a step that uploads "
    "the run directory as the {artifact} artifact (see examples/workflows/pr-gate.yml); "
    "pull requests opened after that run are compared with it."
)
# Beside the run directory: downloaded artifacts and re-scoring scratch.
DOWNLOADS = ".downloads"
NO_BASELINE_CHECK = "The check is neutral: with no baseline there is nothing to protect yet."


def refuse_dangerous_event(event_name: str, allow_pull_request_target: bool) -> None:
    """UsageError (exit 64) for ``pull_request_target`` unless the workflow allows it."""
    if event_name == "pull_request_target" and not allow_pull_request_target:
        raise UsageError(
            "refusing to run on pull_request_target: it runs with this repository's secrets and a write "
            "token, which a pull request's code could steal; use pull_request (or the fork-safe "
            "workflow_run pair), or set allow-pull-request-target: true if you accept that risk"
        )


_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def checkout_head(workspace: Path) -> str | None:
    """The commit checked out in ``workspace`` (``git rev-parse HEAD``), None if not a checkout.

    Read from ``.git`` directly (the image needs no git; the checkout step wrote it, and a pull
    request cannot commit into ``.git``): ``HEAD`` is a commit id (a detached checkout, as
    actions/checkout makes of a sha) or ``ref: refs/...``, resolved through the loose ref file
    or ``packed-refs``; a ``.git`` file (``gitdir: ...``) and a worktree's ``commondir`` are
    followed. At most 5 symbolic steps.
    """
    git = workspace / ".git"
    try:
        if git.is_file():
            pointer = git.read_text(encoding="utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return None
            git = (workspace / pointer[len("gitdir:") :].strip()).resolve()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        for _ in range(5):
            if _OBJECT_ID.fullmatch(head):
                return head
            if not head.startswith("ref:"):
                return None
            ref = head[len("ref:") :].strip()
            loose = next((d / ref for d in (git, common) if (d / ref).is_file()), None)
            if loose is not None:
                head = loose.read_text(encoding="utf-8").strip()
                continue
            packed = common / "packed-refs"
            lines = packed.read_text(encoding="utf-8").splitlines() if packed.is_file() else []
            head = next((ln.split(" ", 1)[0] for ln in lines if ln.endswith(" " + ref)), "")
    except (OSError, UnicodeDecodeError):
        return None
    return None


def workflow_path(path: str) -> str:
    """A run's workflow file path without the ref the REST API may append (``gate.yml@main``)."""
    return path.split("@", 1)[0]


@dataclass
class Target:
    """Where a gated result goes: the commit compared, and the PR (None: summary only)."""

    head_sha: str
    pull: PullRequest | None
    baseline_workflow: str


@dataclass
class Result:
    """What one step of the action decided, and what it publishes (report, check conclusion)."""

    decision: str  # pass | review | block | none
    exit_code: int
    report: str
    conclusion: Conclusion
    title: str
    baseline: BaselineSearch | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    text: str | None = None  # the check run's details (the full gate table)
    # raised once the summary and outputs are written (its one line goes to stderr)
    error: RagproofError | None = None

    @classmethod
    def nothing_to_gate(cls) -> Result:
        """No candidate to gate (a run of another event, a failed run, no pull request)."""
        return cls("none", EXIT_OK, "", "neutral", "")

    @classmethod
    def baseline_recorded(cls, report: str, title: str, exit_code: int = EXIT_OK) -> Result:
        """A run recorded as a baseline (exit 4 when too many of its cases failed to serve as one)."""
        return cls("none", exit_code, report, "neutral", title)

    @classmethod
    def no_baseline(cls, report: str, title: str, search: BaselineSearch) -> Result:
        """Neutral: with no baseline there is nothing to protect yet."""
        return cls("none", EXIT_OK, report, "neutral", title, search)

    @classmethod
    def not_comparable(cls, report: str, title: str, search: BaselineSearch) -> Result:
        return cls("none", EXIT_NOT_COMPARABLE, report, "failure", title, search)

    @classmethod
    def refused(
        cls, report: str, title: str, search: BaselineSearch, error: RagproofError | None = None
    ) -> Result:
        """A candidate this gate does not take (e.g. from another workflow file, or an artifact
        refused as bad data): a failing check; ``error``, if any, is raised once all is written."""
        code = error.exit_code if error is not None else EXIT_FAILED
        return cls("none", code, report, "failure", title, search, error=error)

    @classmethod
    def decided(
        cls,
        decision: Outcome,
        fail_on: str,
        report: str,
        title: str,
        search: BaselineSearch,
        review: ReviewConclusion = "action_required",
        text: str | None = None,
    ) -> Result:
        """A gate decision: check conclusion by the decision, exit code by ``fail_on`` and never 0
        beside a red check (:func:`gate.github.checks.step_exit_code`)."""
        conclusion = conclusion_for(decision, review)
        return cls(
            decision,
            step_exit_code(exit_code_for(decision, fail_on), conclusion),
            report,
            conclusion,
            title,
            search,
            text=text,
        )

    def accept(self, actor: str, title: str) -> None:
        """A maintainer accepted a review or block: the check succeeds and the step passes."""
        self.conclusion = "success"
        self.exit_code = EXIT_OK
        self.title = title
        self.outputs["accepted-by"] = actor


class ActionFlow:
    """One step of the action, from an already built context.

    ``install`` runs the ``install`` input (user code) with the configuration that the pipeline
    will run with; it is called only right before a pipeline runs, after every check.
    ``store_dir`` holds the run store and judge cache (never a path of the checkout).
    """

    def __init__(
        self,
        context: GitHubContext,
        pipeline_env: Environment,
        commands: WorkflowCommands,
        config: Config,
        install: Callable[[Config], None],
        store_dir: Path,
    ) -> None:
        self.ctx = context
        self.inputs = context.inputs
        self.pipeline_env = pipeline_env
        self.commands = commands
        self.config = config  # the checkout's ragproof.yaml: on a pull request, the PR's
        self._install = install
        self.out_dir = context.workspace_path(self.inputs.out)
        self.store_dir = store_dir
        self._client: GitHubClient | None = None
        self._sticky: dict[int, IssueComment | None] = {}  # the sticky comment by PR, read once
        self._repository: Repository | None = None
        # The run that holds the candidate's artifact: this one, or for workflow_run the trigger.
        self._artifact_run_url = context.run_url

    # -- helpers -------------------------------------------------------------------------
    @property
    def client(self) -> GitHubClient:
        if self._client is None:
            if self.ctx.token is None:
                raise UsageError(
                    "input github-token (INPUT_GITHUB-TOKEN) is empty: comparing needs a token "
                    "with `permissions: contents: read, actions: read`"
                )
            self._client = GitHubClient(
                api_url=self.ctx.api_url,
                repository=self.ctx.repository,
                token=self.ctx.token.get_secret_value(),
                network=self.ctx.network,
            )
        return self._client

    @property
    def repository(self) -> Repository:
        if self._repository is None:
            self._repository = repository_info(self.client)
        return self._repository

    def default_branch(self) -> str:
        payload = self.ctx.event.repository
        if payload is not None and payload.default_branch:
            return payload.default_branch
        return self.repository.default_branch or "main"

    def _baseline_workflow(self) -> str:
        workflow = self.inputs.baseline_workflow or self.ctx.workflow_file
        if not workflow:
            raise UsageError(
                "input baseline-workflow is empty and GITHUB_WORKFLOW_REF is not set: name the workflow "
                "file whose push runs upload the baseline (e.g. pr-gate.yml)"
            )
        return workflow.rsplit("/", 1)[-1]

    def _scratch(self) -> Path:
        return self.out_dir.parent / DOWNLOADS

    def report_path(self) -> Path:
        return self.out_dir.parent / f"{self.out_dir.name}-report.md"

    def _judge_overrides(self) -> dict[str, object]:
        inputs = self.inputs
        # The step's RAGPROOF_JUDGE_* variables are the workflow's (trusted), like the inputs.
        return judge_overrides(
            self.pipeline_env.variables,
            {
                "provider": inputs.judge_provider,
                "model": inputs.judge_model,
                "base_url": inputs.judge_base_url,
                "api_key_env": inputs.judge_api_key_env,
            },
        )

    def policy(self, search: BaselineSearch | None) -> TrustedPolicy:
        """The configuration to run and gate with: the default branch's newest baseline's policy,
        with what differs in the one compared with reported (see gate.github.policy)."""
        latest = search.latest if search is not None else None
        compared = search.baseline if search is not None else None
        return trusted_policy(
            self.config,
            latest.artifact if latest is not None else None,
            store_dir=self.store_dir,
            judge=self._judge_overrides(),
            compared=compared.artifact if compared is not None else None,
        )

    # -- the candidate -------------------------------------------------------------------
    def run_pipeline(
        self, policy: TrustedPolicy, *, env: Environment | None = None, out_dir: Path | None = None
    ) -> RunArtifact:
        """Run ``policy.config`` (after the ``install`` input, unless ``out_dir`` is given: a
        re-scoring, which runs no user code) and read the artifact back."""
        from gate.run.artifact_io import read_artifact
        from gate.run.runner import execute_run

        self.store_dir.mkdir(parents=True, exist_ok=True)
        if out_dir is None:
            self._install(policy.config)
        with self.commands.group(f"ragproof run ({self.inputs.config})"):
            outcome = execute_run(
                policy.config,
                env or self.pipeline_env,
                out_dir or self.out_dir,
                progress=True,
                dataset=policy.dataset,
            )
        if outcome.exit_code != EXIT_OK:
            self.commands.warning(f"the run ended with status {outcome.status} (exit {outcome.exit_code})")
        return read_artifact(outcome.artifact_dir)

    def verify_checkout(self, target: Target) -> None:
        """Before any pull-request code runs: the checkout must be the commit to be evaluated."""
        if target.pull is None:
            return
        head = checkout_head(self.ctx.workspace)
        if head is None:
            raise UsageError(
                f"{self.ctx.workspace}: not a git checkout; check out the pull request's head commit "
                f"{target.head_sha[:7]} before this step (see examples/workflows/pr-gate.yml)"
            )
        if head != target.head_sha:
            raise UsageError(
                f"the checkout is at {head[:12]}, not pull request #{target.pull.number}'s head commit "
                f"{target.head_sha[:12]}: refusing to run a commit other than the one the check would be "
                "posted on (check out the head sha, e.g. ref: ${{ github.event.pull_request.head.sha }})"
            )

    def candidate_for_compare(self, target: Target, policy: TrustedPolicy) -> RunArtifact:
        from gate.run.artifact_io import read_artifact

        if self.inputs.candidate:
            return read_artifact(self.ctx.workspace_path(self.inputs.candidate))
        if self.inputs.mode == "compare":
            # compare mode without `candidate`: the run an earlier step wrote to `out`.
            return read_artifact(self.out_dir)
        self.verify_checkout(target)
        return self.run_pipeline(policy)

    # -- targets -------------------------------------------------------------------------
    def execute(self) -> Result:
        event = self.ctx.event_name
        mode = self.inputs.mode
        # pull_request_target was refused (unless allowed) by the entry point, before any of this.
        if mode == "run":
            return self.baseline_mode()
        if event == "workflow_run":
            return self.workflow_run_mode()
        if mode == "auto" and event == "push" and self.ctx.ref == f"refs/heads/{self.default_branch()}":
            return self.baseline_mode()
        target = self.target()
        search = self.find_baseline(target)
        policy = self.policy(search)
        candidate = self.candidate_for_compare(target, policy)
        return self.gate(candidate, target, search, policy)

    def _same_repository(self, pull: PullRequest) -> bool:
        repo = pull.head.repo
        if repo is None:
            return False
        if repo.id is not None and self.repository.id is not None:
            return repo.id == self.repository.id
        return (repo.full_name or "").lower() == self.ctx.repository.lower()

    def target(self) -> Target:
        event = self.ctx.event_name
        pull: PullRequest | None = None
        if event in ("pull_request", "pull_request_target"):
            pull = self.ctx.event.pull_request
            if pull is None:
                raise UsageError(f"{self.ctx.event_path}: a {event} event without pull_request")
        elif self.inputs.pr_number is not None:
            pull = get_pull(self.client, self.inputs.pr_number)
            runs_code = not (self.inputs.mode == "compare" and self.inputs.candidate)
            if runs_code and not self._same_repository(pull):
                repo = pull.head.repo
                origin = (repo.full_name or f"repository {repo.id}") if repo else "a deleted fork"
                raise UsageError(
                    f"input pr-number: pull request #{pull.number} comes from {origin}, not this repository: "
                    "refusing to run its code with this workflow's secrets (only mode: compare with a "
                    "candidate run is allowed; for forks use the fork-safe workflow_run pair)"
                )
        if pull is not None:
            return Target(pull.head.sha, pull, self._baseline_workflow())
        head = self.ctx.sha or (self.ctx.event.after if self.ctx.event else None)
        if not head:
            raise UsageError("GITHUB_SHA is not set: cannot tell which commit to compare")
        return Target(head, None, self._baseline_workflow())

    def baseline_mode(self) -> Result:
        from gate.report.markdown import render_run_summary

        # The checkout's configuration, with the store out of the checkout. Its judge endpoint
        # only on the default branch (trusted code); elsewhere (`mode: run` on a pull request)
        # the run is data for a later, trusted gate and its judge comes from the workflow only.
        policy = self.policy(None)
        if self._on_default_branch():
            policy.config.judge = self.config.judge.model_copy(
                update={**self._judge_overrides(), "cache_path": None}
            )
        if self.inputs.candidate:
            from gate.run.artifact_io import read_artifact

            run = read_artifact(self.ctx.workspace_path(self.inputs.candidate))
        else:
            run = self.run_pipeline(policy)
        # Plain text: the renderer escapes it.
        intro = (
            f"This run of {self.ctx.ref or 'this commit'} records a baseline: no gate is decided on it. "
            f"Once {self.inputs.out} is uploaded as the {self.inputs.baseline_artifact} artifact, "
            "pull requests are gated against these scores."
        )
        exit_code = EXIT_OK
        limit = policy.config.run.max_failure_rate
        unusable = run.unusable_as_baseline(limit)
        if unusable is not None:
            # Said where it happens: pull requests will skip this run when they look for a baseline.
            intro = (
                f"This run is no usable baseline ({unusable}): pull requests will not be gated against it."
            )
            rate = run.failure_rate()
            if rate is not None and rate > limit:
                self.commands.error(f"this run is no usable baseline: {unusable}", title="ragproof")
                exit_code = EXIT_FAILURE_RATE
            else:
                self.commands.warning(f"this run is no usable baseline: {unusable}", title="ragproof")
        report = render_run_summary(run, context=self._context(None), intro=intro)
        return Result.baseline_recorded(report, f"{self.inputs.check_name}: baseline run", exit_code)

    def _on_default_branch(self) -> bool:
        if self.ctx.event_name.startswith("pull_request") or self.ctx.event_name == "workflow_run":
            return False
        payload = self.ctx.event.repository
        if (payload is None or not payload.default_branch) and self.ctx.token is None:
            return False  # cannot ask (`mode: run` without a token): not trusted
        return self.ctx.ref == f"refs/heads/{self.default_branch()}"

    def _candidate_workflow(self, search: BaselineSearch, baseline_workflow: str) -> str:
        """The workflow path the candidate must come from: the input, else the baseline's run."""
        configured = self.inputs.candidate_workflow
        if not configured and search.baseline is not None and search.baseline.run.path:
            configured = workflow_path(search.baseline.run.path)
        configured = configured or baseline_workflow
        return configured if "/" in configured else f".github/workflows/{configured}"

    def workflow_run_mode(self) -> Result:
        run = self.ctx.event.workflow_run
        if run is None:
            raise UsageError(f"{self.ctx.event_path}: a workflow_run event without workflow_run")
        if run.event not in ("pull_request", "pull_request_target"):
            self.commands.notice(
                f"run {run.id} was triggered by {run.event}, not a pull request: nothing to gate"
            )
            return Result.nothing_to_gate()
        if run.conclusion not in (None, "success"):
            self.commands.warning(f"run {run.id} ended {run.conclusion}: there is no candidate to gate")
            return Result.nothing_to_gate()
        # The triggering workflow is matched by *name*, which a fork can copy: the baselines'
        # workflow must be named by the trusted side (an input), never taken from the trigger.
        workflow = self.inputs.baseline_workflow or self.inputs.candidate_workflow
        if not workflow:
            raise UsageError(
                "workflow_run: set the input baseline-workflow (or candidate-workflow) to the pull-request "
                "workflow's file, e.g. fork-safe-candidate.yml: the triggering run's own workflow cannot be "
                "trusted (a fork can add one with the same name)"
            )
        lookup = pull_for_run(self.client, run)
        if lookup.pull is None:
            self.commands.warning(lookup.reason or "no pull request found")
            return Result.nothing_to_gate()
        self._artifact_run_url = run.html_url or self._artifact_run_url
        target = Target(run.head_sha, lookup.pull, workflow.rsplit("/", 1)[-1])
        search = self.find_baseline(target)
        expected = self._candidate_workflow(search, target.baseline_workflow)
        if workflow_path(run.path or "") != expected:
            return self.refuse_trigger(run, expected, target, search)
        name = self.inputs.baseline_artifact
        notes: list[str] = []
        artifact = find_run_artifact(self.client, run, name, repository_id=self.repository.id, notes=notes)
        if artifact is None:
            raise UsageError(
                f"run {run.id} has no unexpired artifact {name!r}: the pull-request workflow must upload "
                "the run directory under that name (input baseline-artifact)"
            )
        try:
            submitted = fetch_artifact(
                self.client, artifact, self._scratch(), label=f"candidate artifact {name!r} of run {run.id}"
            )
            policy = self.policy(search)
            candidate = self.rescore(submitted, policy, run)
        except DataError as exc:
            return self.refuse_candidate(exc, target, search)
        return self.gate(candidate, target, search, policy)

    def refuse_candidate(self, error: DataError, target: Target, search: BaselineSearch) -> Result:
        """A refused candidate artifact: the comment and a failing check say why; exit 65 after."""
        from gate.report.markdown import render_not_comparable

        report = render_not_comparable(
            str(error), context=self._context(search), heading="candidate artifact refused"
        )
        result = Result.refused(
            report, f"{self.inputs.check_name}: candidate artifact refused", search, error=error
        )
        self.publish(result, target)
        return result

    def refuse_trigger(
        self, run: WorkflowRun, expected: str, target: Target, search: BaselineSearch
    ) -> Result:
        from gate.report.markdown import render_not_comparable

        reason = (
            f"the triggering run {run.id} comes from the workflow {run.path or '(no path)'}, not {expected}: "
            "its artifact is not a candidate of this gate (a workflow with the same name, e.g. from a fork); "
            "set the input candidate-workflow if the candidate workflow moved"
        )
        self.commands.error(reason, title="ragproof")
        report = render_not_comparable(reason, context=self._context(search))
        result = Result.refused(report, f"{self.inputs.check_name}: refused", search)
        self.publish(result, target)
        return result

    def rescore(self, submitted: RunArtifact, policy: TrustedPolicy, run: WorkflowRun) -> RunArtifact:
        """The candidate scored here from its raw outputs (retrieved chunks, answers), as the
        replay adapter does, on the baseline's cases and policy: the scores in an artifact
        written by a pull request's code are never used."""
        import json

        from gate.model.config import AdapterConfig

        scratch = self._scratch() / f"rescore-{run.id}"
        scratch.mkdir(parents=True, exist_ok=True)
        replay = scratch / "outputs.jsonl"
        with replay.open("w", encoding="utf-8") as handle:
            for row in submitted.rows:
                record: dict[str, object] = {"id": row.case_id}
                if row.status != "ok":
                    record["error"] = f"{row.status} in the candidate run: {row.error or ''}".strip()
                else:
                    if row.retrieved is not None:
                        record["retrieved"] = [c.model_dump(mode="json") for c in row.retrieved]
                    if row.answer is not None:
                        record["answer"] = row.answer.model_dump(mode="json")
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        config = policy.config.model_copy(update={"adapter": AdapterConfig(type="replay", path=str(replay))})
        variables = {**self.pipeline_env.variables, "GITHUB_SHA": run.head_sha}
        env = Environment(variables=variables, cwd=self.pipeline_env.cwd, stderr_is_tty=False)
        try:
            return self.run_pipeline(
                dataclasses.replace(policy, config=config),
                env=env,
                out_dir=scratch / "run",
            )
        except DataError as exc:
            raise DataError(f"candidate of run {run.id}: {exc}") from None

    # -- gating --------------------------------------------------------------------------
    def _context(self, search: BaselineSearch | None) -> ReportContext:
        """Links and identity for the report: this run, the artifact, the baseline when found."""
        from datetime import UTC, datetime

        from gate.report.markdown import ReportContext, plain_name

        chosen = search.baseline if search is not None else None
        # "What now" quotes these inside code spans: only plain names (else the defaults).
        names = {}
        if plain_name(self.inputs.baseline_artifact):
            names["artifact_name"] = self.inputs.baseline_artifact
        if plain_name(self.inputs.config):
            names["config_path"] = self.inputs.config
        return ReportContext(
            run_url=self.ctx.run_url,
            artifact_url=f"{self._artifact_run_url}#artifacts" if self._artifact_run_url else None,
            marker=marker(self.inputs.check_name),
            title=self.inputs.check_name,
            now=datetime.now(UTC),
            baseline_commit=chosen.run.head_sha if chosen else None,
            baseline_run_id=str(chosen.run.id) if chosen else None,
            baseline_url=chosen.run.html_url if chosen else None,
            **names,
        )

    @staticmethod
    def _notes(search: BaselineSearch, *first: str) -> str:
        from gate.report.markdown import render_notes

        lines = list(first)
        chosen = search.baseline
        if chosen is not None and chosen.commits_behind is None:
            lines.append(
                f"The merge base {chosen.merge_base_sha[:7]} has no usable baseline at or before it (the pull "
                "request forked before the default branch's baselines, or they expired): compared with the "
                f"default branch's newest baseline instead, {chosen.staleness()}."
            )
        elif chosen is not None and chosen.commits_behind:
            lines.append(chosen.staleness() + ": the newest baseline at or before the merge base.")
        lines += (search.warnings + search.notes)[:10]
        return render_notes(lines)

    def find_baseline(self, target: Target) -> BaselineSearch:
        with self.commands.group("baseline discovery"):
            search = find_baseline(
                self.client,
                head_sha=target.head_sha,
                workflow=target.baseline_workflow,
                artifact_name=self.inputs.baseline_artifact,
                work_dir=self._scratch(),
                repository=self.repository,
            )
            for warning in search.warnings:
                self.commands.warning(warning, title="ragproof")
            for note in search.notes:
                print(note, flush=True)
            if search.baseline is not None:
                print(search.baseline.staleness(), flush=True)
            else:
                print(f"no baseline: {search.reason}", flush=True)
        return search

    def trigger(self) -> Trigger:
        """What started this run: the accept label itself, or (fork-safe pair) which user."""
        event = self.ctx.event
        label = self.inputs.accept_label
        if self.ctx.event_name in ("pull_request", "pull_request_target"):
            labeled = event.action == "labeled" and event.label is not None and event.label.name == label
            return Trigger(labeled_by=event.sender.login if labeled and event.sender else None)
        run = event.workflow_run if self.ctx.event_name == "workflow_run" else None
        starter = run.actor.login if run is not None and run.actor else None
        again = run.triggering_actor.login if run is not None and run.triggering_actor else None
        if run is None or starter is None or again is None or starter.lower() != again.lower():
            return Trigger()  # a re-run by someone else is not the labeler's own start
        return Trigger(started_by=starter, started_at=run.created_at)

    def sticky_comment(self, number: int) -> IssueComment | None:
        """Our sticky comment on pull request ``number`` (every page read once per run)."""
        if number not in self._sticky:
            name, author = self.inputs.check_name, self.inputs.comment_author
            self._sticky[number] = find_comment(self.client, number, name, author=author)
        return self._sticky[number]

    def acceptance(self, target: Target, trigger: Trigger) -> Acceptance | None:
        pull = target.pull
        if pull is None:
            return None

        def recorded() -> tuple[str, str] | None:
            if not self.inputs.comment:
                return None
            ours = self.sticky_comment(pull.number)
            return recorded_acceptance(ours.body if ours else None)

        return find_acceptance(
            self.client,
            pull.number,
            self.inputs.accept_label,
            head_sha=target.head_sha,
            trigger=trigger,
            recorded=recorded,
        )

    def gate(
        self, candidate: RunArtifact, target: Target, search: BaselineSearch, policy: TrustedPolicy
    ) -> Result:
        from gate.decision.compare import compare_runs
        from gate.report.cases import PairedCases
        from gate.report.markdown import (
            check_title,
            render_gate_table,
            render_markdown,
            render_no_baseline,
            render_not_comparable,
        )

        context = self._context(search)
        fail_on = self.inputs.fail_on or policy.config.gate.fail_on
        change_notes = policy.change.notes()
        if change_notes:
            for line in change_notes:
                self.commands.warning(line, title="ragproof: policy change")
        result: Result
        if search.baseline is None:
            how = HOW_TO_MAKE_A_BASELINE.format(artifact=self.inputs.baseline_artifact)
            body = render_no_baseline(candidate, context=context)
            report = (
                body.rstrip()
                + "\n"
                + self._notes(search, f"No baseline yet: {search.reason}. {how}", NO_BASELINE_CHECK)
            )
            result = Result.no_baseline(report, f"{self.inputs.check_name}: no baseline yet", search)
        else:
            try:
                comparison = compare_runs(
                    search.baseline.artifact,
                    candidate,
                    policy.config.gate,
                    allow_mixed_judges=self.inputs.allow_mixed_judges,
                )
            except NotComparableError as exc:
                report = render_not_comparable(str(exc), context=context)
                self.commands.error(str(exc), title="ragproof")
                result = Result.not_comparable(report, f"{self.inputs.check_name}: not comparable", search)
            else:
                decision = comparison.overall
                if policy.change.changed and decision == "pass":
                    # A policy change needs a human: it never passes silently.
                    decision = "review"
                    comparison = comparison.model_copy(update={"overall": decision})
                decides = decision in ("review", "block")
                # A label applied while the commit passes is recorded too: a later run of the same
                # commit that reviews (against a newer baseline, say) keeps the acceptance.
                trigger = self.trigger()
                accepted = self.acceptance(target, trigger) if decides or trigger.labeled_by else None
                first = [*change_notes]
                if decides and accepted is not None and accepted.note():
                    first.insert(0, accepted.note() or "")
                paired = PairedCases(comparison, search.baseline.artifact, candidate)
                report = render_markdown(comparison, context=context, paired=paired) + self._notes(
                    search, *first
                )
                title = check_title(comparison)
                result = Result.decided(
                    decision,
                    fail_on,
                    report,
                    title,
                    search,
                    self.inputs.review_conclusion,
                    text=render_gate_table(comparison, paired=paired),
                )
                if accepted is not None and accepted.accepted and accepted.actor:
                    if decides:
                        result.accept(accepted.actor, f"✅ Accepted by {accepted.actor} · {title}")
                    # the record that lets a later run of this same commit keep the acceptance
                    tag = marker(self.inputs.check_name)
                    result.report = with_record(result.report, tag, target.head_sha, accepted.actor)
                elif decides and accepted is not None and accepted.actor is not None:
                    self.commands.notice(accepted.note() or "", title="ragproof")
        result.outputs["policy-changed"] = "true" if policy.change.changed else "false"
        self.publish(result, target)
        return result

    def publish(self, result: Result, target: Target) -> None:
        """Comment and check run on the PR (when there is one).

        A token that may not write is a warning (the job summary has the report). Any other
        failure to write (GitHub answering 5xx after the retries, 422 twice, a malformed reply)
        does not stop the other write; it becomes an ``::error`` and, once the summary and the
        outputs are written, the step's error (exit 1): a missing check is never silent.
        """
        if target.pull is None:
            return
        failures: list[str] = []
        if self.inputs.comment:
            try:
                name, number = self.inputs.check_name, target.pull.number
                existing = self.sticky_comment(number)
                previous = existing.body if existing is not None else None
                result.report = carried_record(result.report, previous, target.head_sha, marker(name))
                posted = write_comment(self.client, number, name, result.report, existing)
            except (GitHubAPIError, DataError) as exc:
                failures.append(f"the comment on pull request #{target.pull.number}: {exc}")
            else:
                if posted.action == "denied":
                    self.commands.warning(
                        "cannot comment on the pull request: the token is read-only here (a fork's pull request, "
                        "or `permissions: pull-requests: write` missing); the report is in the job summary. "
                        "For forks use the workflow_run pair in examples/workflows/.",
                        title="ragproof",
                    )
                elif posted.url:
                    result.outputs["comment-url"] = posted.url
        try:
            check = create_check_run(
                self.client,
                name=self.inputs.check_name,
                head_sha=target.head_sha,
                conclusion=result.conclusion,
                title=result.title,
                summary=result.report,
                text=result.text,
                details_url=self.ctx.run_url,
            )
        except (GitHubAPIError, DataError) as exc:
            failures.append(f"the check run on {target.head_sha[:7]}: {exc}")
        else:
            if not check.created:
                self.commands.warning(
                    "cannot create the check run: the token lacks `permissions: checks: write` "
                    "(or is read-only for a fork's pull request); the step's own status still reflects the gate",
                    title="ragproof",
                )
        for failure in failures:
            self.commands.error(f"could not write {failure}", title="ragproof")
        if failures and result.error is None:
            result.error = RagproofError(
                f"could not write {failures[0]}"
                + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else "")
                + f"; the decision ({result.decision}) and the report are in the job summary and the outputs"
            )
