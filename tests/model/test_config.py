"""ragproof.yaml loading: unknown keys with their path, types, RAGPROOF_* overrides, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.core.errors import UsageError
from gate.model.config import Config, load_config, parse_config

MINIMAL = "dataset: cases.jsonl\nadapter: {type: python, target: 'pipe:make'}\n"


def _load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Config:
    path = tmp_path / "ragproof.yaml"
    path.write_text(text)
    return load_config(path, env)


def test_minimal_config_gets_the_documented_defaults(tmp_path: Path) -> None:
    config = _load(tmp_path, MINIMAL)
    assert config.version == 1 and config.run.k == 5 and config.run.source_match == "chunk"
    assert config.adapter.timeout_s == 60 and config.adapter.concurrency == 8 and config.adapter.retries == 2
    assert config.adapter.methods == ["retrieve", "answer"]
    assert config.run.store == ".ragproof/store.sqlite" and config.judge.model is None
    assert config.resolve("cases.jsonl") == tmp_path / "cases.jsonl"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (MINIMAL + "run: {k: 5, sorce_match: chunk}\n", "run.sorce_match: unknown key"),
        (
            MINIMAL + "gate: {metrics: {answer.token_f1: {mni: 0.5}}}\n",
            "gate.metrics.answer.token_f1.mni: unknown key",
        ),
        (MINIMAL + "extra_section: {}\n", "extra_section: unknown key"),
        (MINIMAL + "run: {k: 0}\n", "run.k: Input should be greater than or equal to 1"),
        (
            MINIMAL + "run: {source_match: page}\n",
            "run.source_match: Input should be 'chunk', 'document' or 'substring'",
        ),
        (
            MINIMAL.replace("python", "grpc"),
            "adapter.type: Input should be 'python', 'http', 'command', 'replay', 'langchain', 'llamaindex' or 'haystack'",
        ),
        ("dataset: cases.jsonl\nadapter: {type: command}\n", "adapter.type 'command' needs adapter.command"),
        (
            "dataset: cases.jsonl\nadapter: {type: http, url: 'http://x', methods: [embed]}\n",
            "adapter.methods.0",
        ),
        ("version: 2\n" + MINIMAL, "version: Input should be 1"),
        ("adapter: {type: replay, path: r.jsonl}\n", "dataset: Field required"),
        ("- just\n- a list\n", "expected a mapping at the top level"),
        ("", "config file is empty"),
    ],
)
def test_errors_are_one_line_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        _load(tmp_path, text)
    assert message in str(info.value)
    assert str(info.value).startswith(str(tmp_path / "ragproof.yaml"))
    assert "\n" not in str(info.value) and info.value.exit_code == 64


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


def test_environment_overrides_the_judge_section(tmp_path: Path) -> None:
    env = {
        "RAGPROOF_JUDGE_MODEL": "gpt-judge",
        "RAGPROOF_JUDGE_BASE_URL": "http://127.0.0.1:9/v1",
        "RAGPROOF_MAX_COST_USD": "1.5",
        "RAGPROOF_JUDGE_INPUT_COST_PER_MTOK": " 0.25 ",
        "RAGPROOF_JUDGE_OUTPUT_COST_PER_MTOK": "",  # empty: ignored
    }
    config = _load(tmp_path, MINIMAL + "judge: {model: from-file, output_cost_per_mtok: 2.0}\n", env)
    assert config.judge.model == "gpt-judge"
    assert config.judge.base_url == "http://127.0.0.1:9/v1"
    assert config.judge.max_cost_usd == 1.5 and config.judge.input_cost_per_mtok == 0.25
    assert config.judge.output_cost_per_mtok == 2.0


def test_bad_override_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match="environment variable RAGPROOF_MAX_COST_USD: expected a float, got 'lots'"
    ):
        _load(tmp_path, MINIMAL, {"RAGPROOF_MAX_COST_USD": "lots"})


def test_config_hash_follows_settings_that_change_scores(tmp_path: Path) -> None:
    base = parse_config({"dataset": "d", "adapter": {"type": "python", "target": "a:b"}}, tmp_path / "c.yaml")
    same = parse_config(
        {
            "dataset": "d",
            "adapter": {"type": "python", "target": "a:b", "concurrency": 32},
            "run": {"store": "x.db"},
        },
        tmp_path / "c.yaml",
    )
    other_k = parse_config(
        {"dataset": "d", "adapter": {"type": "python", "target": "a:b"}, "run": {"k": 3}}, tmp_path / "c.yaml"
    )
    assert base.config_hash() == same.config_hash()  # concurrency and store location do not change scores
    assert base.config_hash() != other_k.config_hash()


# ---------------------------------------------------------------- typos, hints and lines

METRICS = ["retrieval.recall_at_k", "answer.exact_match", "answer.token_f1", "adapter.failure_rate"]
TYPOS_YAML = """dataset: cases.jsonl
adapter:
  type: python
  target: pipe:make
run:
  k: 5
gate:
  margin: 0.02
  metrics:
    answer.exact_match: {margin: 0.05}
    answer.f1: {margin: 0.05}
"""


def _error(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> str:
    path = tmp_path / "ragproof.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        load_config(path, env, metric_names=METRICS)
    assert info.value.exit_code == 64 and "\n" not in str(info.value)
    return str(info.value).removeprefix(f"{path}")


def test_a_misspelt_gate_metric_is_an_error_with_its_line_and_the_closest_name(tmp_path: Path) -> None:
    assert _error(tmp_path, TYPOS_YAML) == (
        ":11: gate.metrics.answer.f1: unknown metric 'answer.f1'; did you mean answer.token_f1?"
    )
    # without the registry's names (the model layer alone) the key is not checked
    (tmp_path / "ragproof.yaml").write_text(TYPOS_YAML)
    assert "answer.f1" in load_config(tmp_path / "ragproof.yaml").gate.metrics


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            MINIMAL + "run: {metrics: [retrieval.recal_at_k]}\n",
            ":3: run.metrics.0: unknown metric 'retrieval.recal_at_k'; did you mean retrieval.recall_at_k?",
        ),
        (
            MINIMAL + "gate:\n  include:\n    - answer.exact_match\n    - exact_match\n",
            ":6: gate.include.1: unknown metric 'exact_match'; did you mean answer.exact_match?",
        ),
        (
            MINIMAL + "gate:\n  metrics:\n    adapter.failure_rate: {max: 0.1}\n    zzz: {min: 1}\n",
            ":6: gate.metrics.zzz: unknown metric 'zzz'; see `ragproof report --list-metrics`",
        ),
    ],
)
def test_every_metric_name_is_checked(tmp_path: Path, text: str, message: str) -> None:
    assert _error(tmp_path, text) == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            TYPOS_YAML.replace("  margin: 0.02", "  marign: 0.02"),
            ":8: gate.marign: unknown key; did you mean margin?",
        ),
        (
            TYPOS_YAML.replace("  k: 5", "  k: 5\n  sorce_match: chunk"),
            ":7: run.sorce_match: unknown key; did you mean source_match?",
        ),
        (
            TYPOS_YAML.replace("{margin: 0.05}\n    answer.f1", "{mrgin: 0.05}\n    answer.f1"),
            ":10: gate.metrics.answer.exact_match.mrgin: unknown key; did you mean margin?",
        ),
        (
            TYPOS_YAML.replace("  target: pipe:make", "  module: pipe:make"),
            ":4: adapter.module: unknown key; a python pipeline is named by target: 'module:attr'",
        ),
        # a value of the wrong shape names its own line
        (TYPOS_YAML.replace("  k: 5", "  k: [5]"), ":6: run.k: Input should be a valid integer"),
        (
            TYPOS_YAML.replace("  margin: 0.02", "  margin: two percent"),
            ":8: gate.margin: Input should be a valid number, unable to parse string as a number",
        ),
        # a missing key: the line of the section that lacks it
        (
            TYPOS_YAML.replace("  target: pipe:make\n", ""),
            ":2: adapter: Value error, adapter.type 'python' needs adapter.target",
        ),
    ],
)
def test_unknown_keys_get_a_suggestion_and_wrong_values_their_line(
    tmp_path: Path, text: str, message: str
) -> None:
    assert _error(tmp_path, text) == message


def test_a_value_from_the_environment_names_no_line(tmp_path: Path) -> None:
    text = MINIMAL + "judge:\n  provider: openai\n"
    assert _error(tmp_path, text, {"RAGPROOF_JUDGE_PROVIDER": "azure"}) == (
        ": judge.provider: Input should be 'openai' or 'anthropic'"
    )


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        (
            "  slices: [kind, tag]\n",
            ":4: gate.slices.1: unknown slice dimension 'tag'; did you mean tags? "
            "(expected kind, tags, tags:NAME or metadata.FIELD)",
        ),
        (
            "  slices:\n    - kind\n    - metdata.lang\n",
            ":6: gate.slices.1: unknown slice dimension 'metdata.lang'; did you mean metadata.lang? "
            "(expected kind, tags, tags:NAME or metadata.FIELD)",
        ),
        (
            "  slices: [kind, tags]\n  gate_slices: ['tags:']\n",
            ":5: gate.gate_slices.0: unknown slice dimension 'tags:'; did you mean tags? (expected kind, "
            "tags, tags:NAME or metadata.FIELD)",
        ),
        (
            "  cluster_by: metdata.document_id\n",
            ":4: gate.cluster_by: unknown case field 'metdata.document_id'; did you mean "
            "metadata.document_id? (expected metadata.FIELD, kind, tags, question, expected_answer)",
        ),
        (
            "  cluster_by: document_id\n",
            ":4: gate.cluster_by: unknown case field 'document_id' (expected metadata.FIELD, kind, tags, "
            "question, expected_answer)",
        ),
    ],
)
def test_slice_dimensions_and_the_cluster_field_are_checked_before_the_run(
    tmp_path: Path, gate: str, message: str
) -> None:
    assert _error(tmp_path, MINIMAL + "gate:\n" + gate) == message


def test_valid_slice_dimensions_and_cluster_fields_load(tmp_path: Path) -> None:
    text = (
        MINIMAL + "gate:\n  slices: [kind, tags, 'tags:topic', metadata.lang]\n  cluster_by: metadata.doc\n"
    )
    gate = _load(tmp_path, text).gate
    assert (gate.slices, gate.cluster_by) == (["kind", "tags", "tags:topic", "metadata.lang"], "metadata.doc")
