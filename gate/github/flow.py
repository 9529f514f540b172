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
  validated); the PR is found from the run and must still have that head commit.

No baseline: the comment shows the absolute scores, says there is no baseline yet and how to
make one; the check is neutral and the step passes. Runs that cannot be compared exit 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.environment import Environment
from gate.core.errors import EXIT_NOT_COMPARABLE, EXIT_OK, NotComparableError, UsageError
from gate.decision.decide import Overall, exit_code_for
from gate.github.baseline import (
    BaselineSearch,
    fetch_artifact,
    find_baseline,
    find_run_artifact,
    repository_info,
)
from gate.github.checks import CONCLUSION_OF_DECISION, Conclusion, create_check_run
from gate.github.client import GitHubClient
from gate.github.comment import marker, upsert_comment
from gate.github.context import GitHubContext
from gate.github.models import PullRequest, Repository
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

    @classmethod
    def nothing_to_gate(cls) -> Result:
        """No candidate to gate (a run of another event, a failed run, no pull request)."""
        return cls("none", EXIT_OK, "", "neutral", "")

    @classmethod
    def baseline_recorded(cls, report: str, title: str) -> Result:
        return cls("none", EXIT_OK, report, "neutral", title)

    @classmethod
    def no_baseline(cls, report: str, title: str, search: BaselineSearch) -> Result:
        return cls("none", EXIT_OK, report, "neutral", title, search)

    @classmethod
    def not_comparable(cls, report: str, title: str, search: BaselineSearch) -> Result:
        return cls("none", EXIT_NOT_COMPARABLE, report, "failure", title, search)

    @classmethod
    def decided(
        cls,
        decision: Overall,
        fail_on: str,
        report: str,
        title: str,
        search: BaselineSearch,
        text: str | None = None,
    ) -> Result:
        """A gate decision: exit code by ``fail_on``, check conclusion by the decision."""
        return cls(
            decision,
            exit_code_for(decision, fail_on),
            report,
            CONCLUSION_OF_DECISION[decision],
            title,
            search,
            text=text,
        )


class ActionFlow:
    """One step of the action, from an already built context."""

    def __init__(
        self,
        context: GitHubContext,
        pipeline_env: Environment,
        commands: WorkflowCommands,
        config: Config,
    ) -> None:
        self.ctx = context
        self.inputs = context.inputs
        self.pipeline_env = pipeline_env
        self.commands = commands
        self.config = config
        self.out_dir = context.workspace_path(self.inputs.out)
        self._client: GitHubClient | None = None
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

    def _baseline_workflow(self, fallback: str | None = None) -> str:
        workflow = self.inputs.baseline_workflow or fallback or self.ctx.workflow_file
        if not workflow:
            raise UsageError(
                "input baseline-workflow is empty and GITHUB_WORKFLOW_REF is not set: name the workflow "
                "file whose push runs upload the baseline (e.g. pr-gate.yml)"
            )
        return workflow.rsplit("/", 1)[-1]

    def _scratch(self) -> Path:
        return self.out_dir.parent / ".downloads"

    def report_path(self) -> Path:
        return self.out_dir.parent / f"{self.out_dir.name}-report.md"

    # -- the candidate -------------------------------------------------------------------
    def run_pipeline(self) -> RunArtifact:
        from gate.run.artifact_io import read_artifact
        from gate.run.runner import execute_run

        with self.commands.group(f"ragproof run ({self.inputs.config})"):
            outcome = execute_run(self.config, self.pipeline_env, self.out_dir, progress=True)
        if outcome.exit_code != EXIT_OK:
            self.commands.warning(f"the run ended with status {outcome.status} (exit {outcome.exit_code})")
        return read_artifact(outcome.artifact_dir)

    def local_candidate(self) -> RunArtifact:
        from gate.run.artifact_io import read_artifact

        if self.inputs.candidate:
            return read_artifact(self.ctx.workspace_path(self.inputs.candidate))
        return self.run_pipeline()

    # -- targets -------------------------------------------------------------------------
    def execute(self) -> Result:
        event = self.ctx.event_name
        mode = self.inputs.mode
        if mode == "run":
            return self.baseline_mode()
        if event == "workflow_run":
            return self.workflow_run_mode()
        if mode == "auto" and event == "push" and self.ctx.ref == f"refs/heads/{self.default_branch()}":
            return self.baseline_mode()
        target = self.target()
        candidate = self.candidate_for_compare()
        return self.gate(candidate, target)

    def candidate_for_compare(self) -> RunArtifact:
        if self.inputs.mode == "compare" and not self.inputs.candidate:
            from gate.run.artifact_io import read_artifact

            # compare mode without `candidate`: the run an earlier step wrote to `out`.
            return read_artifact(self.out_dir)
        return self.local_candidate()

    def target(self) -> Target:
        event = self.ctx.event_name
        pull: PullRequest | None = None
        if event in ("pull_request", "pull_request_target"):
            pull = self.ctx.event.pull_request
            if pull is None:
                raise UsageError(f"{self.ctx.event_path}: a {event} event without pull_request")
        elif self.inputs.pr_number is not None:
            pull = get_pull(self.client, self.inputs.pr_number)
        if pull is not None:
            return Target(pull.head.sha, pull, self._baseline_workflow())
        head = self.ctx.sha or (self.ctx.event.after if self.ctx.event else None)
        if not head:
            raise UsageError("GITHUB_SHA is not set: cannot tell which commit to compare")
        return Target(head, None, self._baseline_workflow())

    def baseline_mode(self) -> Result:
        from gate.report.markdown import render_run_summary

        run = self.local_candidate()
        # Plain text: the renderer escapes it.
        intro = (
            f"This run of {self.ctx.ref or 'this commit'} records a baseline: no gate is decided on it. "
            f"Once {self.inputs.out} is uploaded as the {self.inputs.baseline_artifact} artifact, "
            "pull requests are gated against these scores."
        )
        report = render_run_summary(run, context=self._context(None), intro=intro)
        return Result.baseline_recorded(report, f"{self.inputs.check_name}: baseline run")

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
        lookup = pull_for_run(self.client, run)
        if lookup.pull is None:
            self.commands.warning(lookup.reason or "no pull request found")
            return Result.nothing_to_gate()
        name = self.inputs.baseline_artifact
        notes: list[str] = []
        artifact = find_run_artifact(self.client, run, name, repository_id=self.repository.id, notes=notes)
        if artifact is None:
            raise UsageError(
                f"run {run.id} has no unexpired artifact {name!r}: the pull-request workflow must upload "
                "the run directory under that name (input baseline-artifact)"
            )
        candidate = fetch_artifact(
            self.client, artifact, self._scratch(), label=f"candidate artifact {name!r} of run {run.id}"
        )
        self._artifact_run_url = run.html_url or self._artifact_run_url
        # The REST API may name the file with its ref (".github/workflows/gate.yml@main").
        fallback = run.path.split("@", 1)[0].rsplit("/", 1)[-1] if run.path else None
        target = Target(run.head_sha, lookup.pull, self._baseline_workflow(fallback))
        return self.gate(candidate, target)

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
        if search.baseline is not None and search.baseline.commits_behind:
            lines.append(search.baseline.staleness() + ": the newest baseline at or before the merge base.")
        lines += search.notes[:10]
        return render_notes(lines)

    def gate(self, candidate: RunArtifact, target: Target) -> Result:
        from gate.decision.compare import compare_runs
        from gate.report.markdown import (
            check_title,
            render_gate_table,
            render_markdown,
            render_no_baseline,
            render_not_comparable,
        )

        with self.commands.group("baseline discovery"):
            search = find_baseline(
                self.client,
                head_sha=target.head_sha,
                workflow=target.baseline_workflow,
                artifact_name=self.inputs.baseline_artifact,
                work_dir=self._scratch(),
                repository=self.repository,
            )
            for note in search.notes:
                print(note, flush=True)
            if search.baseline is not None:
                print(search.baseline.staleness(), flush=True)
            else:
                print(f"no baseline: {search.reason}", flush=True)
        context = self._context(search)
        fail_on = self.inputs.fail_on or self.config.gate.fail_on
        if search.baseline is None:
            how = HOW_TO_MAKE_A_BASELINE.format(artifact=self.inputs.baseline_artifact)
            body = render_no_baseline(candidate, context=context)
            report = body.rstrip() + "\n" + self._notes(search, f"No baseline yet: {search.reason}. {how}")
            result = Result.no_baseline(report, f"{self.inputs.check_name}: no baseline yet", search)
        else:
            try:
                comparison = compare_runs(
                    search.baseline.artifact,
                    candidate,
                    self.config.gate,
                    allow_mixed_judges=self.inputs.allow_mixed_judges,
                )
            except NotComparableError as exc:
                report = render_not_comparable(str(exc), context=context)
                self.commands.error(str(exc), title="ragproof")
                result = Result.not_comparable(report, f"{self.inputs.check_name}: not comparable", search)
            else:
                runs = {"baseline": search.baseline.artifact, "candidate": candidate}
                report = render_markdown(comparison, context=context, **runs) + self._notes(search)
                result = Result.decided(
                    comparison.overall,
                    fail_on,
                    report,
                    check_title(comparison),
                    search,
                    text=render_gate_table(comparison, **runs),
                )
        self.publish(result, target)
        return result

    def publish(self, result: Result, target: Target) -> None:
        """Comment and check run on the PR (when there is one); failures to write are warnings."""
        if target.pull is None:
            return
        if self.inputs.comment:
            posted = upsert_comment(self.client, target.pull.number, self.inputs.check_name, result.report)
            if posted.action == "denied":
                self.commands.warning(
                    "cannot comment on the pull request: the token is read-only here (a fork's pull request, "
                    "or `permissions: pull-requests: write` missing); the report is in the job summary. "
                    "For forks use the workflow_run pair in examples/workflows/.",
                    title="ragproof",
                )
            elif posted.url:
                result.outputs["comment-url"] = posted.url
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
        if not check.created:
            self.commands.warning(
                "cannot create the check run: the token lacks `permissions: checks: write` "
                "(or is read-only for a fork's pull request); the step's own status still reflects the gate",
                title="ragproof",
            )
