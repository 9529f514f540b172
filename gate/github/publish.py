"""Publishing one step's result: the sticky comment, the check run, and what the report links.

:class:`Result` is what a step decided and publishes; :class:`Publisher` writes it to the pull
request (:mod:`gate.github.comment`, :mod:`gate.github.checks`) and reads back the one thing an
earlier run left for this one: the record of an acceptance on ragproof's own check run on the
commit (:func:`gate.github.accept.check_run_record`), never a comment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gate.core.errors import EXIT_FAILED, EXIT_NOT_COMPARABLE, EXIT_OK, DataError, RagproofError
from gate.decision.decide import Outcome, exit_code_for
from gate.github.accept import carried_record, check_run_record
from gate.github.baseline import BaselineSearch
from gate.github.checks import Conclusion, ReviewConclusion, conclusion_for, create_check_run, step_exit_code
from gate.github.client import GitHubAPIError
from gate.github.comment import find_comment, marker, write_comment
from gate.github.context import GitHubContext
from gate.github.models import IssueComment
from gate.github.plan import GitHubSession, Target
from gate.github.workflow import WorkflowCommands

if TYPE_CHECKING:
    from gate.report.markdown import ReportContext


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
        """Neutral: the default branch has no usable baseline, so there is nothing to protect yet."""
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


class Publisher:
    """Writes a :class:`Result` to its pull request; links and identity for the report."""

    def __init__(self, context: GitHubContext, commands: WorkflowCommands, session: GitHubSession) -> None:
        self.ctx = context
        self.inputs = context.inputs
        self.commands = commands
        self.session = session
        self._sticky: dict[int, IssueComment | None] = {}  # the sticky comment by PR, read once
        self._records: dict[str, str | None] = {}  # by commit: our check run's summary that records
        # The run that holds the candidate's artifact: this one, or for workflow_run the trigger.
        self.artifact_run_url = context.run_url

    def sticky_comment(self, number: int) -> IssueComment | None:
        """Our sticky comment on pull request ``number`` (every page read once per run): where the
        report is shown, never where a record is read from."""
        if number not in self._sticky:
            name, author = self.inputs.check_name, self.inputs.comment_author
            self._sticky[number] = find_comment(self.session.client, number, name, author=author)
        return self._sticky[number]

    def record(self, head_sha: str) -> str | None:
        """The summary of our own check run on ``head_sha`` that records an acceptance (read once).

        A token that may not list check runs finds none: a record then never accepts anything."""
        if head_sha not in self._records:
            try:
                self._records[head_sha] = check_run_record(
                    self.session.client,
                    name=self.inputs.check_name,
                    head_sha=head_sha,
                    author=self.inputs.comment_author,
                )
            except GitHubAPIError as exc:
                if not exc.is_permission_denied:
                    raise
                self.commands.warning(
                    f"cannot list the check runs of {head_sha[:7]} ({exc}): an earlier acceptance of this "
                    "commit is not carried over (grant `permissions: checks: write`)",
                    title="ragproof",
                )
                self._records[head_sha] = None
        return self._records[head_sha]

    def context(self, search: BaselineSearch | None) -> ReportContext:
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
            artifact_url=f"{self.artifact_run_url}#artifacts" if self.artifact_run_url else None,
            marker=marker(self.inputs.check_name),
            title=self.inputs.check_name,
            now=datetime.now(UTC),
            baseline_commit=chosen.run.head_sha if chosen else None,
            baseline_run_id=str(chosen.run.id) if chosen else None,
            baseline_url=chosen.run.html_url if chosen else None,
            **names,
        )

    @staticmethod
    def notes(search: BaselineSearch, *first: str) -> str:
        """The report's notes: ``first``, which baseline was compared with, the search's notes."""
        from gate.report.markdown import render_notes

        lines = list(first)
        chosen = search.baseline
        if chosen is not None and chosen.commits_behind is None and chosen.merge_base_sha is None:
            lines.append(
                "This commit shares no history with the default branch: compared with the default "
                f"branch's newest baseline, {chosen.staleness()}."
            )
        elif chosen is not None and chosen.commits_behind is None:
            lines.append(
                f"The merge base {(chosen.merge_base_sha or '')[:7]} has no usable baseline at or before it (the pull "
                "request forked before the default branch's baselines, or they expired): compared with the "
                f"default branch's newest baseline instead, {chosen.staleness()}."
            )
        elif chosen is not None and chosen.commits_behind:
            lines.append(chosen.staleness() + ": the newest baseline at or before the merge base.")
        lines += (search.warnings + search.notes)[:10]
        return render_notes(lines)

    def publish(self, result: Result, target: Target) -> None:
        """Comment and check run on the PR (when there is one).

        The report keeps the record of an acceptance an earlier run of this commit left on our
        check run (:func:`gate.github.accept.carried_record`). A token that may not write is a
        warning (the job summary has the report). Any other failure to write (GitHub answering
        5xx after the retries, 422 twice, a malformed reply) does not stop the other write; it
        becomes an ``::error`` and, once the summary and the outputs are written, the step's error
        (exit 1): a missing check is never silent.
        """
        if target.pull is None:
            return
        failures: list[str] = []
        name = self.inputs.check_name
        try:
            previous = self.record(target.head_sha)
        except (GitHubAPIError, DataError) as exc:
            failures.append(f"the check runs of {target.head_sha[:7]} (listed for a record): {exc}")
        else:
            result.report = carried_record(result.report, previous, target.head_sha, marker(name))
        if self.inputs.comment:
            try:
                number = target.pull.number
                posted = write_comment(
                    self.session.client, number, name, result.report, self.sticky_comment(number)
                )
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
                self.session.client,
                name=name,
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
