"""``ragproof.yaml``: pydantic models and loading with one-line errors.

All keys are optional except ``dataset`` and ``adapter``. Unknown keys are rejected with
their dotted path, the line and a "did you mean" (:mod:`gate.core.suggest`); a value of the
wrong shape names its line (:mod:`gate.core.yamllines`). Metric names (``run.metrics``,
``gate.include``, ``gate.metrics`` keys) are checked against the names the caller passes as
``metric_names`` (the registry lives in a later package). ``RAGPROOF_*`` environment
variables (docs/metrics.md) override the judge section; they are applied by :func:`load_config`
from an explicit mapping, never read here from the process environment.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import SplitResult, urlsplit, urlunsplit

import yaml
from pydantic import AfterValidator, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from gate.boundary.files import read_text_file
from gate.core.errors import UsageError, location, validated, yaml_problem
from gate.core.strict import StrictModel
from gate.core.suggest import did_you_mean
from gate.core.yamllines import YamlLines

# ragproof.yaml is a few kilobytes; a pull request's may be anything: read at most this much.
MAX_CONFIG_BYTES = 1_000_000


class AdapterConfig(StrictModel):
    FOREIGN_KEYS: ClassVar[dict[str, str]] = {
        "module": "a python pipeline is named by target: 'module:attr'",
        "entrypoint": "a python pipeline is named by target: 'module:attr'",
        "endpoint": "an HTTP pipeline's address is url",
        "base_url": "an HTTP pipeline's address is url",
        "cmd": "a command pipeline's argv is command: [program, arg, ...]",
        "file": "a replay file is path",
        "workers": "parallel cases are concurrency",
    }

    type: Literal["python", "http", "command", "replay", "langchain", "llamaindex", "haystack"]
    """How the pipeline is called: `python`, `http`, `command`, `replay`, or a framework adapter
    (`langchain`, `llamaindex`, `haystack`)."""
    target: str | None = None
    """python: `module:attr` naming an object, a class or a zero-argument factory. Framework adapters: the
    framework object (or a class or function making it)."""
    inputs: list[str] | None = None
    """Framework adapters: where the question goes (LangChain: the input key; Haystack: `COMPONENT.SOCKET`).
    Default: detected."""
    documents_output: str | None = None
    """Framework adapters: where the retrieved documents come out. Default: `context`, or detected."""
    answer_output: str | None = None
    """Framework adapters: where the answer comes out. Default: `answer`, or detected."""
    url: str | None = None
    """http: the service's base URL; the adapter POSTs to `{url}{retrieve_path}` and `{url}{answer_path}`."""
    retrieve_path: str | None = "/retrieve"
    """http: path of the retrieve call."""
    answer_path: str | None = "/answer"
    """http: path of the answer call."""
    headers: dict[str, str] = Field(default_factory=dict)
    """http: static request headers."""
    headers_from_env: dict[str, str] = Field(default_factory=dict)
    """http: header name -> environment variable holding its value (kept out of the config file)."""
    methods: list[Literal["retrieve", "answer"]] = Field(
        default_factory=lambda: list[Literal["retrieve", "answer"]](["retrieve", "answer"]), min_length=1
    )
    """http and command: the calls the pipeline has (a retrieval-only or answer-only pipeline names one)."""
    command: list[str] | None = None
    """command: the program and its arguments; a long-lived process speaking JSON lines on stdin/stdout."""
    env_passthrough: list[str] = Field(default_factory=list)
    """command and http: environment variables withheld from the pipeline that are let through anyway."""
    path: str | None = None
    """replay: the recorded outputs (JSONL), keyed by case id."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Seconds per case, retries included; past it the case is a `timeout` row."""
    concurrency: int = Field(default=8, ge=1, le=1024)
    """Cases in flight at once."""
    retries: int = Field(default=2, ge=0, le=20)
    """Retries of a failed call."""
    backoff_s: float = Field(default=0.5, ge=0, le=60)
    """First retry delay in seconds; doubles per attempt, plus random jitter (a Retry-After header wins)."""
    max_response_bytes: int = Field(default=10_000_000, gt=0)
    """Largest reply accepted, in bytes."""

    @model_validator(mode="after")
    def _required_per_type(self) -> AdapterConfig:
        needed = {"http": "url", "command": "command", "replay": "path"}.get(self.type, "target")
        if not getattr(self, needed):
            raise ValueError(f"adapter.type {self.type!r} needs adapter.{needed}")
        return self


# How a retrieved chunk is matched against expected_source_ids.
SourceMatch = Literal["chunk", "document", "substring"]
# Graded nDCG gain of a relevance grade g: linear (g, as trec_eval) or exp2 (2^g - 1).
Gain = Literal["linear", "exp2"]
# The judge's API: OpenAI-compatible chat completions or Anthropic messages.
JudgeProvider = Literal["openai", "anthropic"]
# Which overall decision fails the step (exit 1).
FailOn = Literal["block", "review", "never"]


class ScoringSettings(StrictModel):
    """The settings that change a metric's value: the ``run`` keys every metric reads.

    ``RunConfig`` is one (the ``run`` section adds what does not change a score), the metrics
    receive one in their context, and run.json records the first four (``numeric_tolerance``
    is part of the run's recorded configuration)."""

    k: int = Field(default=5, ge=1, le=10_000)
    """Retrieval depth, and the k of the @k metrics."""
    source_match: SourceMatch = "chunk"
    """How a retrieved chunk matches `expected_source_ids`: by chunk id (`chunk`), by its document id
    (`document`) or by containing the expected string (`substring`)."""
    document_id_key: str = Field(default="document_id", min_length=1)
    """Metadata key of a retrieved chunk that holds its document id (`source_match: document`), e.g. `source`
    (LangChain loaders) or `source_id` (Haystack splitters)."""
    ndcg_gain: Gain = "linear"
    """Graded nDCG gain of a relevance grade g: `linear` (g, as trec_eval) or `exp2` (2^g - 1)."""
    numeric_tolerance: float = Field(default=0.01, ge=0)
    """Relative tolerance of `answer.numeric_match`."""


class RunConfig(ScoringSettings):
    metrics: Literal["all"] | list[str] = "all"
    """`all`, or a list of metric names (`ragproof report --list-metrics`)."""
    max_failure_rate: float = Field(default=0.5, ge=0, le=1)
    """A run whose adapter-failure rate (failed cases / cases) exceeds this exits 4 and is never used as a
    baseline."""
    store: str = ".ragproof/store.sqlite"
    """The SQLite store (per-case results for `--resume`, the judge cache), relative to the working
    directory."""


class JudgeConfig(StrictModel):
    provider: JudgeProvider = "openai"
    """`openai` (any OpenAI-compatible endpoint) or `anthropic`."""
    model: str | None = None
    """The judge model; none: judge metrics are skipped. Overridden by `RAGPROOF_JUDGE_MODEL`."""
    base_url: str | None = None
    """The judge endpoint. Overridden by `RAGPROOF_JUDGE_BASE_URL`."""
    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the judge's key (withheld from the pipeline)."""
    temperature: float = 0.0
    """Sampling temperature."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Seconds per judge call."""
    retries: int = Field(default=2, ge=0, le=20)
    """Retries of a failed judge call."""
    concurrency: int = Field(default=4, ge=1, le=256)
    """Judge calls in flight."""
    input_cost_per_mtok: float | None = None
    """USD per million input tokens, for cost figures (`RAGPROOF_JUDGE_INPUT_COST_PER_MTOK`)."""
    output_cost_per_mtok: float | None = None
    """USD per million output tokens (`RAGPROOF_JUDGE_OUTPUT_COST_PER_MTOK`)."""
    max_cost_usd: float | None = None
    """The budget in USD: past it the run stops as `aborted:budget` (`RAGPROOF_MAX_COST_USD`)."""
    cache: bool = True
    """Reuse judge replies from the cache."""
    cache_path: str | None = None
    """A judge cache database of its own; default: the run store (`run.store`). A separate path lets a
    workflow keep only the cache between jobs."""
    response_format: Literal["json_object", "json_schema", "none"] = "json_object"
    """OpenAI-compatible structured output: `json_object` (widest support), `json_schema` or `none`."""
    max_output_tokens: int = Field(default=1024, ge=16, le=100_000)
    """Cap on a judge reply's length, in tokens."""


def _dotted_hint(name: str, choices: list[str]) -> str:
    """The "did you mean" suffix for ``name`` among ``choices`` (also for a misspelt ``metadata.``)."""
    head, dot, rest = name.partition(".")
    if dot and rest and head != "metadata" and did_you_mean(head, ["metadata"]):
        return f"; did you mean metadata.{rest}?"
    hint = did_you_mean(name, choices)
    return f"; {hint}" if hint else ""


def _slice_dimension(dimension: str) -> str:
    """A slice dimension: ``kind``, ``tags``, ``tags:NAME`` or ``metadata.FIELD`` (else an error now,
    not after the run: the summary would fail on it)."""
    named_tag = dimension.startswith("tags:") and len(dimension) > len("tags:")
    metadata_field = dimension.startswith("metadata.") and len(dimension) > len("metadata.")
    if dimension in ("kind", "tags") or named_tag or metadata_field:
        return dimension
    raise PydanticCustomError(
        "slice_dimension",
        "unknown slice dimension {dimension}{hint} (expected kind, tags, tags:NAME or metadata.FIELD)",
        {"dimension": repr(dimension), "hint": _dotted_hint(dimension, ["kind", "tags"])},
    )


# Row fields a bootstrap cluster may be formed by (besides metadata.FIELD).
CLUSTER_FIELDS = ("kind", "tags", "question", "expected_answer")


def _cluster_field(field: str) -> str:
    """``metadata.FIELD``, a case field of :data:`CLUSTER_FIELDS`, ``auto`` or ``none``: a misspelt one would make every
    case its own cluster, i.e. silently no clustering."""
    head, dot, rest = field.partition(".")
    if (head == "metadata" and dot and rest) or (field in CLUSTER_FIELDS) or field in ("auto", "none"):
        return field
    raise PydanticCustomError(
        "case_field",
        "unknown case field {field}{hint} (expected metadata.FIELD, {fields})",
        {
            "field": repr(field),
            "hint": _dotted_hint(field, list(CLUSTER_FIELDS)),
            "fields": ", ".join(CLUSTER_FIELDS),
        },
    )


SliceDimension = Annotated[str, AfterValidator(_slice_dimension)]
ClusterField = Annotated[str, AfterValidator(_cluster_field)]


class GateMetricConfig(StrictModel):
    margin: float | None = Field(default=None, ge=0)
    """This metric's non-inferiority margin (default: `gate.margin`)."""
    min: float | None = None
    """Floor for the candidate's level of this metric."""
    max: float | None = None
    """Ceiling for the candidate's level (lower-is-better metrics, e.g. `robustness.overrefusal`)."""
    gate: bool = True
    """Whether this metric gates (false: shown, never deciding)."""


class GateConfig(StrictModel):
    margin: float = Field(default=0.02, ge=0)
    """Non-inferiority margin: the largest drop you accept as no worse (a gate passes when its interval's
    lower end stays above it; a 0/1 metric needs 189+ cases to pass 0.02 on evidence)."""
    confidence: float = Field(default=0.95, gt=0, lt=1)
    """Interval confidence."""
    resamples: int = Field(default=10_000, ge=100, le=1_000_000)
    """Bootstrap resamples."""
    seed: int = 0
    """Bootstrap seed: the same inputs and seed give the same decision."""
    min_pairs: int | None = Field(default=None, ge=1)
    """Paired cases below which a gate is skipped, with the reason; unset: the smallest n the interval
    methods are calibrated at. Power, not this floor, decides the rest."""
    interval: Literal["auto", "percentile"] = "auto"
    """`auto` (each gate's interval chosen by its data) or `percentile` (the bootstrap everywhere)."""
    slices: list[SliceDimension] = Field(default_factory=lambda: ["kind", "tags"])
    """Slice dimensions shown in reports: `kind`, `tags`, `tags:NAME` or `metadata.FIELD`."""
    gate_slices: list[SliceDimension] | None = None
    """The slice dimensions that gate (default: every shown one)."""
    cluster_by: ClusterField | None = "auto"
    """A case field whose values are the independent units, e.g. `metadata.document_id`; `auto`: the document
    id when the cases carry one (over enough documents); null or `none`: resample cases."""
    family_wise: bool = True
    """Blocks controlled over the family of distinct gates (passes are per gate either way)."""
    underpowered: Literal["inform", "review"] = "inform"
    """Whether a gate that neither passed nor showed a drop confirmed over the family makes the overall
    decision review: `inform` (no, the default) or `review` (every gate that did not pass reviews)."""
    review_fdr: float = Field(default=0.10, gt=0, lt=1)
    """The false-discovery level of reviews: a gate reviews when its drop passes the weighted
    Benjamini-Hochberg rule at this level over the family of gates."""
    fail_on: FailOn = "block"
    """Which decision fails the step: `block`, `review` or `never`."""
    include: Literal["all"] | list[str] = "all"
    """The metrics that gate: `all` (every scored, non-diagnostic metric) or a list of names."""
    metrics: dict[str, GateMetricConfig] = Field(default_factory=dict)
    """Per metric: `margin`, `min`, `max`, `gate`."""


class CalibrationConfig(StrictModel):
    fixtures: str | None = None
    """Human-scored fixtures for `ragproof calibrate` (default: the bundled ones)."""
    min_exact: float = Field(default=0.70, ge=0, le=1)
    """Required exact agreement with the human scores."""
    min_within_band: float = Field(default=0.90, ge=0, le=1)
    """Required agreement within one band."""


class CompositeConfig(StrictModel):
    weights: dict[str, float] = Field(default_factory=dict)
    """Metric name -> weight of the composite trust score (renormalised over the components defined for a
    case)."""

    @field_validator("weights")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        for name, w in v.items():
            if w <= 0:
                raise ValueError(f"weight of {name} must be > 0")
        return v


def _without_credentials(parts: SplitResult) -> SplitResult:
    """``parts`` without a user name or password in its network location."""
    if not (parts.username or parts.password):
        return parts
    port = f":{parts.port}" if parts.port else ""
    return parts._replace(netloc=f"{parts.hostname or ''}{port}")


class Config(StrictModel):
    FOREIGN_KEYS: ClassVar[dict[str, str]] = {
        "metrics": "metric names go in run.metrics (what is scored) and gate.metrics (how each gates)",
        "threshold": "per-metric floors go in gate.metrics: {NAME: {min: ...}}; the drop allowed is gate.margin",
        "thresholds": "per-metric floors go in gate.metrics: {NAME: {min: ...}}; the drop allowed is gate.margin",
        "pipeline": "the pipeline is configured under adapter (type, target/url/command/path)",
    }

    version: Literal[1] = 1
    """Config schema version."""
    dataset: str
    """The cases file (JSONL or YAML), relative to the config."""
    dataset_version: str | None = None
    """A label of the dataset's version, recorded in run.json and shown in reports and the comment."""
    adapter: AdapterConfig
    """How the pipeline is called."""
    run: RunConfig = Field(default_factory=RunConfig)
    """How the cases are run and scored."""
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    """The LLM judge (optional)."""
    gate: GateConfig = Field(default_factory=GateConfig)
    """How a candidate is compared with the baseline and decided."""
    calibration: CalibrationConfig = Field(default_factory=CalibrationConfig)
    """`ragproof calibrate`: the judge against human scores."""
    composite: CompositeConfig | None = None
    """The composite trust score (optional)."""

    # Where the file was loaded from; relative paths in the config resolve against it.
    base_dir: Path = Field(default=Path("."), exclude=True)

    def composite_weights(self) -> dict[str, float]:
        """``composite.weights`` (component metric -> weight); empty without a composite section."""
        return dict(self.composite.weights) if self.composite is not None else {}

    def resolve(self, relative: str) -> Path:
        """A path from the config, resolved against the config file's directory."""
        p = Path(relative)
        return p if p.is_absolute() else (self.base_dir / p)

    def metric_references(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Every metric name the config mentions, with its location: run.metrics, gate.include, gate.metrics."""
        refs: list[tuple[tuple[str | int, ...], str]] = []
        for section, key, names in (
            ("run", "metrics", self.run.metrics),
            ("gate", "include", self.gate.include),
        ):
            if names != "all":
                refs += [((section, key, i), name) for i, name in enumerate(names)]
        refs += [(("gate", "metrics", name), name) for name in self.gate.metrics]
        return refs

    def adapter_identity(self) -> dict[str, Any]:
        """Which pipeline the adapter calls: its type and target / url / command / path.

        Framework adapters add their input/output keys; http and command add ``methods`` (which calls are made); http its paths. A URL's
        credentials are left out (they may be rotated, and this goes into run.json). Timeouts,
        retries and concurrency are not identity: they change how, not what, is called.
        """
        adapter = self.adapter
        identity: dict[str, Any] = {"type": adapter.type}
        if adapter.type in ("python", "langchain", "llamaindex", "haystack"):
            identity["target"] = adapter.target
            # framework adapters: where the question goes in and the results come out
            for key in ("inputs", "documents_output", "answer_output"):
                if getattr(adapter, key) is not None:
                    identity[key] = getattr(adapter, key)
        elif adapter.type == "http":
            identity["url"] = urlunsplit(_without_credentials(urlsplit(adapter.url or "")))
            if (adapter.retrieve_path, adapter.answer_path) != ("/retrieve", "/answer"):
                identity.update(retrieve_path=adapter.retrieve_path, answer_path=adapter.answer_path)
            identity["methods"] = list(adapter.methods)
        elif adapter.type == "command":
            identity["command"] = list(adapter.command or [])
            identity["methods"] = list(adapter.methods)
        else:
            identity["path"] = adapter.path
        return identity

    def recorded(self) -> dict[str, Any]:
        """The resolved configuration as run.json records it: adapter header values and URL
        credentials redacted (the rest, policy included, is what a later gate reads back)."""
        data = self.model_dump(mode="json")
        adapter = data["adapter"]
        adapter["headers"] = {name: "<redacted>" for name in adapter.get("headers") or {}}
        if adapter.get("url"):
            parts = urlsplit(adapter["url"])
            if parts.username or parts.password:
                adapter["url"] = urlunsplit(_without_credentials(parts))
        return data

    def config_hash(self) -> str:
        """sha256 of the settings that change scores (run, the adapter's identity, judge model).

        The adapter's identity (:meth:`adapter_identity`) is part of it, so ``--resume`` and
        ``merge`` refuse rows of another pipeline.
        """
        # document_id_key joins the hash only when not the default, so configs that leave it
        # alone keep the hash (and the resume key) they had before the key existed.
        unhashed = {"store"} | ({"document_id_key"} if self.run.document_id_key == "document_id" else set())
        material = {
            "run": self.run.model_dump(mode="json", exclude=unhashed),
            "adapter": self.adapter_identity(),
            "judge": {"model": self.judge.model, "provider": self.judge.provider},
            "composite": self.composite.model_dump(mode="json") if self.composite else None,
        }
        blob = json.dumps(material, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()


# RAGPROOF_* variable -> (section, key, type)
ENV_OVERRIDES: dict[str, tuple[str, str, type]] = {
    "RAGPROOF_JUDGE_MODEL": ("judge", "model", str),
    "RAGPROOF_JUDGE_BASE_URL": ("judge", "base_url", str),
    "RAGPROOF_JUDGE_PROVIDER": ("judge", "provider", str),
    "RAGPROOF_JUDGE_API_KEY_ENV": ("judge", "api_key_env", str),
    "RAGPROOF_JUDGE_INPUT_COST_PER_MTOK": ("judge", "input_cost_per_mtok", float),
    "RAGPROOF_JUDGE_OUTPUT_COST_PER_MTOK": ("judge", "output_cost_per_mtok", float),
    "RAGPROOF_MAX_COST_USD": ("judge", "max_cost_usd", float),
}


def apply_env_overrides(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """Return ``data`` with RAGPROOF_* overrides applied (empty values are ignored)."""
    for var, (section, key, typ) in ENV_OVERRIDES.items():
        raw = env.get(var)
        if raw is None or raw.strip() == "":
            continue
        try:
            value = typ(raw.strip())
        except ValueError:
            raise UsageError(f"environment variable {var}: expected a {typ.__name__}, got {raw!r}") from None
        sec = data.setdefault(section, {})
        if not isinstance(sec, dict):
            raise UsageError(f"config key {section}: expected a mapping")
        sec[key] = value
    return data


def parse_config(
    data: Any,
    source: str | Path,
    env: Mapping[str, str] | None = None,
    *,
    metric_names: Collection[str] | None = None,
    lines: YamlLines | None = None,
) -> Config:
    """Validate already-parsed YAML/JSON data as a config.

    ``metric_names``: the known metric names, to check every metric name in the config
    against (None: not checked). ``lines``: the source text's node lines, so an error names
    its line (none for a value that came from a RAGPROOF_* variable).
    """
    if not isinstance(data, dict):
        raise UsageError(f"{source}: expected a mapping at the top level")
    overridden = {
        (sec, key) for var, (sec, key, _) in ENV_OVERRIDES.items() if (env or {}).get(var, "").strip()
    }

    def line_of(loc: tuple[str | int, ...]) -> int | None:
        if lines is None or tuple(loc[:2]) in overridden:
            return None
        return lines.line_of(loc)

    data = apply_env_overrides(dict(data), env or {})
    cfg = validated(Config, data, str(source), UsageError, line_of=line_of)
    cfg.base_dir = Path(source).parent if str(source) not in {"", "-"} else Path(".")
    if metric_names is not None:
        for loc, name in cfg.metric_references():
            if name not in metric_names:
                hint = did_you_mean(name, metric_names) or "see `ragproof report --list-metrics`"
                where = location(source, line_of(loc))
                raise UsageError(f"{where}: {'.'.join(map(str, loc))}: unknown metric {name!r}; {hint}")
    return cfg


def load_config(
    path: str | Path, env: Mapping[str, str] | None = None, *, metric_names: Collection[str] | None = None
) -> Config:
    """Load and validate ``ragproof.yaml``. Raises UsageError with one clear line."""
    p = Path(path)
    text = read_text_file(p, "config", UsageError, cap=MAX_CONFIG_BYTES)
    try:
        data, lines = YamlLines.load(text)
    except yaml.YAMLError as exc:
        where, problem = yaml_problem(p, exc)
        raise UsageError(f"{where}: {problem}") from None
    if data is None:
        raise UsageError(f"{p}: config file is empty; expected at least 'dataset' and 'adapter'")
    return parse_config(data, p, env, metric_names=metric_names, lines=lines)
