"""Obtaining the candidate run the gate compares.

- A run of the pull request's pipeline on the trusted policy (:meth:`CandidateSource.run`):
  only once the checkout's ``HEAD`` is the commit the check goes on
  (:meth:`CandidateSource.verify_checkout`), and only after the ``install`` input ran with that
  configuration.
- A run made elsewhere: the ``candidate`` input, or in ``mode: compare`` the run an earlier step
  wrote to ``out``.
- In the fork-safe pair, the triggering run's artifact (:meth:`CandidateSource.submitted`,
  untrusted data, validated), re-scored here from its raw outputs on the trusted policy
  (:meth:`CandidateSource.rescore`): scores written by a pull request's code are never used.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from gate.core.environment import Environment
from gate.core.errors import EXIT_OK, DataError, UsageError
from gate.github.baseline import fetch_artifact, find_run_artifact
from gate.github.client import GitHubClient
from gate.github.context import GitHubContext
from gate.github.models import WorkflowRun
from gate.github.plan import Target, checkout_head
from gate.github.policy import TrustedPolicy
from gate.github.workflow import WorkflowCommands
from gate.model.artifact import RunArtifact
from gate.model.config import AdapterConfig, Config


class CandidateSource:
    """Where the candidate comes from (see the module docstring).

    ``install`` runs the ``install`` input (user code) with the configuration the pipeline will
    run with; it is called only right before a pipeline runs, after every check. ``store_dir``
    holds the run store and judge cache (never a path of the checkout); ``scratch`` the
    downloads and re-scorings.
    """

    def __init__(
        self,
        context: GitHubContext,
        pipeline_env: Environment,
        commands: WorkflowCommands,
        install: Callable[[Config], None],
        store_dir: Path,
        out_dir: Path,
        scratch: Path,
    ) -> None:
        self.ctx = context
        self.inputs = context.inputs
        self.pipeline_env = pipeline_env
        self.commands = commands
        self._install = install
        self.store_dir = store_dir
        self.out_dir = out_dir
        self.scratch = scratch

    def run(
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

    def given(self) -> RunArtifact | None:
        """The run named by the ``candidate`` input, if any."""
        from gate.run.artifact_io import read_artifact

        if not self.inputs.candidate:
            return None
        return read_artifact(self.ctx.workspace_path(self.inputs.candidate))

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

    def for_compare(self, target: Target, policy: TrustedPolicy) -> RunArtifact:
        """The ``candidate`` input, compare mode's ``out``, or a run of the checkout on ``policy``."""
        from gate.run.artifact_io import read_artifact

        given = self.given()
        if given is not None:
            return given
        if self.inputs.mode == "compare":
            # compare mode without `candidate`: the run an earlier step wrote to `out`.
            return read_artifact(self.out_dir)
        self.verify_checkout(target)
        return self.run(policy)

    def submitted(self, client: GitHubClient, run: WorkflowRun, repository_id: int | None) -> RunArtifact:
        """The triggering run's artifact, downloaded and validated (DataError when refused)."""
        name = self.inputs.baseline_artifact
        notes: list[str] = []
        artifact = find_run_artifact(client, run, name, repository_id=repository_id, notes=notes)
        if artifact is None:
            raise UsageError(
                f"run {run.id} has no unexpired artifact {name!r}: the pull-request workflow must upload "
                "the run directory under that name (input baseline-artifact)"
            )
        return fetch_artifact(
            client, artifact, self.scratch, label=f"candidate artifact {name!r} of run {run.id}"
        )

    def rescore(self, submitted: RunArtifact, policy: TrustedPolicy, run: WorkflowRun) -> RunArtifact:
        """The candidate scored here from its raw outputs (retrieved chunks, answers), as the
        replay adapter does, on the baseline's cases and policy: the scores in an artifact
        written by a pull request's code are never used."""
        scratch = self.scratch / f"rescore-{run.id}"
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
            return self.run(dataclasses.replace(policy, config=config), env=env, out_dir=scratch / "run")
        except DataError as exc:
            raise DataError(f"candidate of run {run.id}: {exc}") from None
