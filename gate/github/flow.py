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

The baseline and the policy are the default branch's (:mod:`gate.github.baseline`): when the
merge base has no usable baseline the newest one is compared with. No baseline at all on the
default branch: the comment shows the absolute scores, says there is no baseline yet and how to
make one; the check is neutral (nothing to protect yet) and the step passes. Runs that cannot
be compared exit 3. A red check is a red step: beside a check that concludes failure or
``action_required`` the step never exits 0.

The concerns live apart: :mod:`gate.github.plan` resolves the event into a plan (the target
commit and pull request, what started the run), :mod:`gate.github.candidate` obtains the
candidate, :mod:`gate.github.publish` writes the comment and the check run; this module
decides, in order, what each event does with them.

Trust (docs/action.md "Security model"): ``pull_request_target`` is refused unless allowed;
a dispatch for a fork's pull request runs no code; the checkout's HEAD must be the pull
request's head commit before any pipeline (or ``install``) runs, and the check goes on that
commit; the policy, dataset and judge come from the default branch's newest baseline
(:mod:`gate.github.policy`);
a ``workflow_run`` candidate must come from the configured workflow file and is re-scored from
its raw outputs; a maintainer's accept label turns review or block into a success
(:mod:`gate.github.accept`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gate.core.environment import Environment
from gate.core.errors import EXIT_FAILURE_RATE, EXIT_OK, DataError, NotComparableError, UsageError
from gate.decision.decide import Accepted, VerdictCause
from gate.decision.verdict import final_verdict
from gate.github.accept import Acceptance, Trigger, find_acceptance, recorded_acceptance, with_record
from gate.github.baseline import BaselineSearch, find_baseline
from gate.github.candidate import CandidateSource
from gate.github.comment import marker
from gate.github.context import GitHubContext
from gate.github.models import WorkflowRun
from gate.github.plan import EventPlan, GitHubSession, Target, workflow_path
from gate.github.policy import TrustedPolicy, judge_overrides, trusted_policy
from gate.github.publish import Publisher, Result
from gate.github.pulls import pull_for_run
from gate.github.workflow import WorkflowCommands
from gate.model.artifact import RunArtifact
from gate.model.config import Config

if TYPE_CHECKING:
    from gate.decision.comparison import Comparison

HOW_TO_MAKE_A_BASELINE = (
    "To make one, run this workflow on a push to the default branch with a step that uploads "
    "the run directory as the {artifact} artifact (see examples/workflows/pr-gate.yml); "
    "pull requests opened after that run are compared with it."
)
# Beside the run directory: downloaded artifacts and re-scoring scratch.
DOWNLOADS = ".downloads"
NO_BASELINE_CHECK = "The check is neutral: with no baseline there is nothing to protect yet."


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
        self.out_dir = context.workspace_path(self.inputs.out)
        self.store_dir = store_dir
        self.session = GitHubSession(context)
        self.plan = EventPlan(context, self.session)
        self.candidates = CandidateSource(
            context,
            pipeline_env,
            commands,
            install,
            store_dir,
            self.out_dir,
            self.out_dir.parent / DOWNLOADS,
        )
        self.publisher = Publisher(context, commands, self.session)

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

    # -- what each event does ------------------------------------------------------------
    def execute(self) -> Result:
        # pull_request_target was refused (unless allowed) by the entry point, before any of this.
        if self.inputs.mode == "run":
            return self.baseline_mode()
        if self.ctx.event_name == "workflow_run":
            return self.workflow_run_mode()
        if self.plan.records_a_baseline():
            return self.baseline_mode()
        target = self.plan.target()
        search = self.find_baseline(target)
        policy = self.policy(search)
        candidate = self.candidates.for_compare(target, policy)
        return self.gate(candidate, target, search, policy)

    def baseline_mode(self) -> Result:
        from gate.report.markdown import render_run_summary

        # The checkout's configuration, with the store out of the checkout. Its judge endpoint
        # only on the default branch (trusted code); elsewhere (`mode: run` on a pull request)
        # the run is data for a later, trusted gate and its judge comes from the workflow only.
        policy = self.policy(None)
        if self.plan.on_default_branch():
            policy.config.judge = self.config.judge.model_copy(
                update={**self._judge_overrides(), "cache_path": None}
            )
        run = self.candidates.given() or self.candidates.run(policy)
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
        report = render_run_summary(run, context=self.publisher.context(None), intro=intro)
        return Result.baseline_recorded(report, f"{self.inputs.check_name}: baseline run", exit_code)

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
        lookup = pull_for_run(self.session.client, run)
        if lookup.pull is None:
            self.commands.warning(lookup.reason or "no pull request found")
            return Result.nothing_to_gate()
        self.publisher.artifact_run_url = run.html_url or self.publisher.artifact_run_url
        target = Target(run.head_sha, lookup.pull, workflow.rsplit("/", 1)[-1])
        search = self.find_baseline(target)
        expected = self.plan.candidate_workflow(search, target.baseline_workflow)
        if workflow_path(run.path or "") != expected:
            return self.refuse_trigger(run, expected, target, search)
        try:
            submitted = self.candidates.submitted(self.session.client, run, self.session.repository.id)
            policy = self.policy(search)
            candidate = self.candidates.rescore(submitted, policy, run)
        except DataError as exc:
            return self.refuse_candidate(exc, target, search)
        return self.gate(candidate, target, search, policy, candidate_path=expected)

    def refuse_candidate(self, error: DataError, target: Target, search: BaselineSearch) -> Result:
        """A refused candidate artifact: the comment and a failing check say why; exit 65 after."""
        from gate.report.markdown import render_not_comparable

        report = render_not_comparable(
            str(error), context=self.publisher.context(search), heading="candidate artifact refused"
        )
        result = Result.refused(
            report, f"{self.inputs.check_name}: candidate artifact refused", search, error=error
        )
        self.publisher.publish(result, target)
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
        report = render_not_comparable(reason, context=self.publisher.context(search))
        result = Result.refused(report, f"{self.inputs.check_name}: refused", search)
        self.publisher.publish(result, target)
        return result

    # -- gating --------------------------------------------------------------------------
    def find_baseline(self, target: Target) -> BaselineSearch:
        with self.commands.group("baseline discovery"):
            search = find_baseline(
                self.session.client,
                head_sha=target.head_sha,
                workflow=target.baseline_workflow,
                artifact_name=self.inputs.baseline_artifact,
                work_dir=self.candidates.scratch,
                repository=self.session.repository,
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

    def acceptance(self, target: Target, trigger: Trigger) -> Acceptance | None:
        """The accept label's state for the commit under test (see gate.github.accept)."""
        pull = target.pull
        if pull is None:
            return None

        def recorded() -> tuple[str, str] | None:
            return recorded_acceptance(self.publisher.record(target.head_sha))

        return find_acceptance(
            self.session.client,
            pull.number,
            self.inputs.accept_label,
            head_sha=target.head_sha,
            trigger=trigger,
            recorded=recorded,
        )

    def gate(
        self,
        candidate: RunArtifact,
        target: Target,
        search: BaselineSearch,
        policy: TrustedPolicy,
        *,
        candidate_path: str | None = None,
    ) -> Result:
        """Compare ``candidate`` with the baseline found, under the trusted policy, and publish
        the result: no baseline, not comparable, or decided (with any acceptance)."""
        change_notes = policy.change.notes()
        for line in change_notes:
            self.commands.warning(line, title="ragproof: policy change")
        result: Result
        if search.baseline is None:
            result = self._no_baseline(candidate, search)
        else:
            baseline = search.baseline.artifact
            compared = self._compare(baseline, candidate, search, policy)
            if isinstance(compared, Result):
                result = compared
            else:
                result = self._decided(
                    compared, baseline, candidate, target, search, policy, change_notes, candidate_path
                )
        result.outputs["policy-changed"] = "true" if policy.change.changed else "false"
        self.publisher.publish(result, target)
        return result

    def _no_baseline(self, candidate: RunArtifact, search: BaselineSearch) -> Result:
        """The candidate's scores alone, with how to record a first baseline."""
        from gate.report.markdown import render_no_baseline

        how = HOW_TO_MAKE_A_BASELINE.format(artifact=self.inputs.baseline_artifact)
        body = render_no_baseline(candidate, context=self.publisher.context(search))
        report = (
            body.rstrip()
            + "\n"
            + self.publisher.notes(search, f"No baseline yet: {search.reason}. {how}", NO_BASELINE_CHECK)
        )
        return Result.no_baseline(report, f"{self.inputs.check_name}: no baseline yet", search)

    def _compare(
        self, baseline: RunArtifact, candidate: RunArtifact, search: BaselineSearch, policy: TrustedPolicy
    ) -> Comparison | Result:
        """The runs' comparison, or the not-comparable result (with an error line) when they
        cannot be compared."""
        from gate.decision.compare import compare_runs
        from gate.report.markdown import render_not_comparable

        try:
            comparison = compare_runs(
                baseline, candidate, policy.config.gate, allow_mixed_judges=self.inputs.allow_mixed_judges
            )
        except NotComparableError as exc:
            report = render_not_comparable(str(exc), context=self.publisher.context(search))
            self.commands.error(str(exc), title="ragproof")
            return Result.not_comparable(report, f"{self.inputs.check_name}: not comparable", search)
        return comparison

    def _decided(
        self,
        comparison: Comparison,
        baseline: RunArtifact,
        candidate: RunArtifact,
        target: Target,
        search: BaselineSearch,
        policy: TrustedPolicy,
        change_notes: list[str],
        candidate_path: str | None,
    ) -> Result:
        """What the gate found: the data, then a policy change (never a silent pass), then an
        acceptance where one applies."""
        from gate.report.cases import PairedCases
        from gate.report.markdown import check_title, render_gate_table, render_markdown

        found = final_verdict(comparison.verdict, policy_changed=policy.change.changed, accepted=None)
        comparison = comparison.model_copy(update={"overall": found.decision, "verdict": found})
        decides = found.decision in ("review", "block")
        accepted = self._label(target, decides, candidate_path)
        note = accepted.note() if decides and accepted is not None else None
        first = [note, *change_notes] if note else [*change_notes]
        paired = PairedCases(comparison, baseline, candidate)
        report = render_markdown(comparison, context=self.publisher.context(search), paired=paired)
        title = check_title(comparison)
        result = Result.decided(
            found.decision,
            self.inputs.fail_on or policy.config.gate.fail_on,
            report + self.publisher.notes(search, *first),
            title,
            search,
            self.inputs.review_conclusion,
            text=render_gate_table(comparison, paired=paired),
        )
        if accepted is not None and accepted.accepted and accepted.actor:
            self._record_acceptance(result, comparison, policy, target, accepted.actor, title)
        elif decides and accepted is not None and accepted.actor is not None:
            self.commands.notice(accepted.note() or "", title="ragproof")
        return result

    def _label(self, target: Target, decides: bool, candidate_path: str | None) -> Acceptance | None:
        """The accept label's state, when it matters: the verdict decides (review or block), or
        the triggering event applied a label."""
        # A label applied while the commit passes is recorded too: a later run of the same
        # commit that reviews (against a newer baseline, say) keeps the acceptance.
        # (The fork-safe pair's trigger lists runs: only asked when an acceptance matters.)
        trigger = self.plan.trigger(candidate_path if decides else None)
        return self.acceptance(target, trigger) if decides or trigger.labeled_by else None

    def _record_acceptance(
        self,
        result: Result,
        comparison: Comparison,
        policy: TrustedPolicy,
        target: Target,
        actor: str,
        title: str,
    ) -> None:
        """An accept label applies: the verdict says so where it decides, and the report carries
        the record that lets a later run of this same commit keep the acceptance."""
        final = final_verdict(
            comparison.verdict,
            policy_changed=policy.change.changed,
            accepted=Accepted(actor, target.head_sha),
        )
        if final.cause == VerdictCause.ACCEPTED:
            result.accept(actor, f"✅ Accepted by {actor} · {title}")
        tag = marker(self.inputs.check_name)
        result.report = with_record(result.report, tag, target.head_sha, actor)
