"""The gate's policy comes from trusted ground: the baseline run, the action's inputs.

A pull request controls its checkout: ``ragproof.yaml``, the dataset, any file committed into
the workspace. In the action, everything that decides the verdict is therefore taken from
the **baseline run** (made on the default branch, found by :mod:`gate.github.baseline`):

- the ``gate`` section (margin, min_pairs, include, per-metric settings), the ``run`` section
  (k, metric selection, matching), ``composite`` weights, the dataset's path and version,
  from the baseline's recorded configuration (``run.json`` ``config``);
- the cases, from the baseline's ``dataset.jsonl`` (validated, its sha256 checked against
  ``run.json`` when the artifact was read): the candidate pipeline runs on exactly those;
- the judge: the baseline's ``judge`` section, with provider, ``base_url``, model and key
  variable overridden by the step's ``RAGPROOF_JUDGE_*`` variables and the ``judge-*`` inputs
  (the workflow's, so trusted); without a baseline those four come from the inputs and the
  variables alone, else their defaults - never from the pull request's file;
- the run store and judge cache: a directory of the action's (``store-dir``), never a path
  of the checkout.

Only the adapter (how the pull request's pipeline is called) is the pull request's, with
``adapter.env_passthrough`` stripped of every withheld credential and, with a baseline, of every
name the baseline's own ``adapter.env_passthrough`` does not list: which of the job's variables
the pipeline may see is the default branch's choice (an addition is reported, and applies after
merge).

Where the pull request's own file or dataset differ from the baseline's (the one compared with,
at or before its fork point), :class:`PolicyChange` lists exactly what: dotted keys with
old -> new values, cases added, removed and edited by id; where the default branch's policy
changed since that baseline, ``since`` lists that too (the newest applies). The action then
decides at least ``review``: a policy change needs a human and takes effect after merge, when
the default branch records a new baseline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gate.boundary.secrets import is_withheld
from gate.core.errors import DataError, UsageError, validated
from gate.model.artifact import RunArtifact
from gate.model.config import ENV_OVERRIDES, Config
from gate.model.dataset import Case, Dataset, canonical_case_json, load_dataset

# Sections of ragproof.yaml that decide the verdict (compared key by key).
POLICY_KEYS = ("dataset", "dataset_version", "run", "gate", "judge", "composite")
# Settings replaced in the action whatever either side says (not compared).
REPLACED_KEYS = frozenset({"run.store", "judge.cache_path"})
# The judge's endpoint and key: never the pull request's.
JUDGE_ENDPOINT = ("provider", "base_url", "model", "api_key_env")
MAX_LISTED = 20
MAX_VALUE_CHARS = 80


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"gate": {"margin": 0.02}}`` -> ``{"gate.margin": 0.02}``; lists stay values."""
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(_flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _shown(value: Any) -> str:
    text = "(unset)" if value is _MISSING else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


_MISSING = object()


@dataclass(frozen=True)
class KeyChange:
    key: str
    old: Any
    new: Any

    def __str__(self) -> str:
        return f"{self.key}: {_shown(self.old)} → {_shown(self.new)}"


@dataclass
class PolicyChange:
    """How the pull request's config and dataset differ from the baseline's, and (``since``) how
    the default branch's policy changed between the baseline compared with and the newest one,
    whose policy is used."""

    keys: list[KeyChange] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # e.g. a withheld env_passthrough name
    since: PolicyChange | None = None
    since_run: str | None = None  # the run id of the baseline compared with, when ``since`` is set

    def _differs(self) -> bool:
        return bool(self.keys or self.added or self.removed or self.edited)

    @property
    def changed(self) -> bool:
        return self._differs() or bool(self.problems) or (self.since is not None and self.since.changed)

    def _details(self, config: str) -> list[str]:
        lines = []
        if self.keys:
            shown = "; ".join(str(change) for change in self.keys[:MAX_LISTED])
            more = f"; … {len(self.keys) - MAX_LISTED} more" if len(self.keys) > MAX_LISTED else ""
            lines.append(f"{config} changes: {shown}{more}.")
        for label, ids in (("added", self.added), ("removed", self.removed), ("edited", self.edited)):
            if ids:
                shown = ", ".join(ids[:MAX_LISTED])
                more = f", … {len(ids) - MAX_LISTED} more" if len(ids) > MAX_LISTED else ""
                lines.append(
                    f"Dataset: {len(ids)} case{'s' if len(ids) != 1 else ''} {label}: {shown}{more}."
                )
        return lines

    def notes(self) -> list[str]:
        """Plain-text lines for the report (empty when nothing changed)."""
        lines: list[str] = []
        if self._differs() or self.problems:
            lines.append(
                "This pull request changes the gate's policy or dataset. The comparison used the default "
                "branch's (the changes take effect after merge, once the default branch records a new "
                "baseline), and the decision is at least review: a maintainer must look at them."
            )
            lines += self._details("ragproof.yaml")
            lines += self.problems
        if self.since is not None and self.since.changed:
            lines.append(
                f"The default branch's policy changed after the baseline compared with (run {self.since_run}): "
                "its newest baseline's policy and cases were used, and the decision is at least review."
            )
            lines += self.since._details("The default branch's ragproof.yaml") + self.since.problems
        return lines


def key_changes(baseline: Mapping[str, Any], pull: Mapping[str, Any]) -> list[KeyChange]:
    """Policy keys whose values differ, in a stable order (dotted path)."""
    old = {k: v for section in POLICY_KEYS for k, v in _flatten({section: baseline.get(section)}).items()}
    new = {k: v for section in POLICY_KEYS for k, v in _flatten({section: pull.get(section)}).items()}
    changes = []
    for key in sorted(set(old) | set(new)):
        if key in REPLACED_KEYS:
            continue
        before, after = old.get(key, _MISSING), new.get(key, _MISSING)
        if before != after:
            changes.append(KeyChange(key, before, after))
    return changes


def case_changes(baseline: Dataset, pull: Dataset, change: PolicyChange) -> None:
    """Cases added, removed and edited (any field differs), by id, in file order."""
    old = {case.id: canonical_case_json(case) for case in baseline.cases}
    new = {case.id: canonical_case_json(case) for case in pull.cases}
    change.added += [cid for cid in new if cid not in old]
    change.removed += [cid for cid in old if cid not in new]
    change.edited += [cid for cid in new if cid in old and new[cid] != old[cid]]


def judge_overrides(env: Mapping[str, str], inputs: Mapping[str, str | None]) -> dict[str, Any]:
    """The judge endpoint settings the workflow gives: ``RAGPROOF_JUDGE_*`` variables, then inputs."""
    values: dict[str, Any] = {}
    for variable, (section, key, _type) in ENV_OVERRIDES.items():
        raw = env.get(variable)
        if section == "judge" and key in JUDGE_ENDPOINT and raw and raw.strip():
            values[key] = raw.strip()
    values.update({key: value for key, value in inputs.items() if value})
    return values


@dataclass
class TrustedPolicy:
    """The configuration the action runs and gates with, and what the pull request changed."""

    config: Config
    dataset: Dataset | None  # None: the config's own dataset (no baseline to take it from)
    change: PolicyChange


def _passthrough(names: list[str], judge_key_env: str, pull_key_env: str, change: PolicyChange) -> list[str]:
    kept = []
    for name in names:
        if is_withheld(name, judge_key_env) or name == pull_key_env:
            change.problems.append(
                f"adapter.env_passthrough names {name}, a credential withheld from the pipeline: ignored."
            )
        else:
            kept.append(name)
    return kept


def _recorded_dataset(baseline: RunArtifact, recorded: Mapping[str, Any], cases: tuple[Case, ...]) -> Dataset:
    """The cases the baseline ran on, as a dataset (its path from the recorded configuration)."""
    return Dataset(
        path=str(recorded.get("dataset", baseline.meta.dataset.path)),
        cases=cases,
        sha256=baseline.meta.dataset.sha256,
        version=baseline.meta.dataset.version,
    )


def _reference(
    baseline: RunArtifact,
    recorded: Mapping[str, Any],
    dataset: Dataset,
    compared: RunArtifact | None,
    change: PolicyChange,
) -> tuple[Mapping[str, Any], Dataset]:
    """The configuration and cases the pull request's are measured against: the compared
    baseline's when it is another run that records them (what changed since is ``change.since``),
    else the newest baseline's."""
    if compared is None or compared is baseline:
        return recorded, dataset
    reference: Mapping[str, Any] = recorded
    reference_cases = dataset
    since = PolicyChange()
    if compared.meta.config is not None and compared.cases is not None:
        reference = compared.meta.config
        reference_cases = Dataset(dataset.path, compared.cases, compared.meta.dataset.sha256)
        since.keys = key_changes(reference, recorded)
        case_changes(reference_cases, dataset, since)
    else:
        since.problems.append(
            f"The baseline compared with (run {compared.meta.run_id}) records no configuration or "
            "dataset (written by an older ragproof): the pull request's changes are measured against "
            "the newest baseline."
        )
    change.since, change.since_run = since, compared.meta.run_id
    return reference, reference_cases


def _pull_changes(
    pull: Config,
    pull_data: Mapping[str, Any],
    reference: Mapping[str, Any],
    reference_cases: Dataset,
    change: PolicyChange,
) -> None:
    """What the pull request's ragproof.yaml and dataset change against the reference."""
    change.keys = key_changes(reference, pull_data)
    try:
        pull_cases = load_dataset(pull.resolve(pull.dataset), pull.dataset_version)
    except DataError as exc:
        change.problems.append(f"The pull request's dataset cannot be read: {exc}")
    else:
        case_changes(reference_cases, pull_cases, change)


def _baseline_sections(data: dict[str, Any], recorded: Mapping[str, Any]) -> None:
    """The policy sections replaced by the baseline's recorded ones (absent there: removed)."""
    for section in POLICY_KEYS:
        if section in recorded:
            data[section] = recorded[section]
        else:
            data.pop(section, None)


def _trusted_ground(data: dict[str, Any], judge: Mapping[str, Any], store_dir: Path) -> str:
    """The workflow's judge endpoint over the judge section, the run store and judge cache in
    ``store_dir``; returns the judge key's variable name in effect."""
    judge_section = dict(data.get("judge") or {})
    judge_section.update(judge)
    judge_section["cache_path"] = None  # the judge cache lives in the store, in store_dir
    data["judge"] = judge_section
    data["run"] = {**(data.get("run") or {}), "store": str(store_dir / "store.sqlite")}
    return str(judge_section.get("api_key_env") or "OPENAI_API_KEY")


def _trusted_passthrough(
    names: list[str], recorded: Mapping[str, Any] | None, change: PolicyChange
) -> list[str]:
    """With a baseline's recorded configuration, only the names it passes itself (an addition is
    reported and ignored until merged); without one, ``names`` as they are."""
    if recorded is None:
        return names
    trusted = set((recorded.get("adapter") or {}).get("env_passthrough") or [])
    added = [name for name in names if name not in trusted]
    if added:
        change.problems.append(
            f"adapter.env_passthrough adds {', '.join(added)}, which the baseline's configuration does not "
            "pass to the pipeline: ignored until merged."
        )
    return [name for name in names if name in trusted]


def trusted_policy(
    pull: Config,
    baseline: RunArtifact | None,
    *,
    store_dir: Path,
    judge: Mapping[str, Any],
    compared: RunArtifact | None = None,
) -> TrustedPolicy:
    """The effective configuration for gating ``pull`` (see the module docstring).

    ``baseline`` is the default branch's newest baseline: its policy applies. ``compared``, the
    baseline whose scores are compared with (the merge base's), when it is another run: what
    the pull request changed is measured against it (the pull request branched from there), and
    how its recorded policy differs from the newest is ``change.since``.

    ``judge`` holds the workflow's judge endpoint settings (:func:`judge_overrides`). A
    baseline without a recorded configuration or dataset (written by an older ragproof) leaves
    the pull request's policy in place, which is then reported as a change (at least review).
    """
    pull_data = pull.model_dump(mode="json")
    change = PolicyChange()
    data = dict(pull_data)
    dataset: Dataset | None = None
    cases = baseline.cases if baseline is not None else None
    recorded = baseline.meta.config if baseline is not None and cases is not None else None
    if baseline is not None and recorded is not None and cases is not None:
        _baseline_sections(data, recorded)
        dataset = _recorded_dataset(baseline, recorded, cases)
        reference, reference_cases = _reference(baseline, recorded, dataset, compared, change)
        _pull_changes(pull, pull_data, reference, reference_cases, change)
    else:
        if baseline is not None:
            change.problems.append(
                f"The baseline run {baseline.meta.run_id} records no configuration or dataset (written by an "
                "older ragproof): the pull request's own ragproof.yaml and dataset were used. Re-run the "
                "baseline workflow on the default branch to record them."
            )
        # the judge's endpoint and key never come from the pull request's file
        data["judge"] = {k: v for k, v in pull_data["judge"].items() if k not in JUDGE_ENDPOINT}
    effective_judge_key = _trusted_ground(data, judge, store_dir)
    adapter = dict(data["adapter"])
    names = _passthrough(
        list(adapter.get("env_passthrough") or []), effective_judge_key, pull.judge.api_key_env, change
    )
    adapter["env_passthrough"] = _trusted_passthrough(names, recorded, change)
    data["adapter"] = adapter
    config = validated(Config, data, "policy from the baseline run (run.json config)", UsageError)
    config.base_dir = pull.base_dir
    return TrustedPolicy(config, dataset, change)
