"""``ragproof import``: other tools' datasets into ours, exact fields, a report, and validate accepts the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from run_helpers import ragproof, write_config

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data" / "import"
DROPPED = "(the evaluated pipeline's output, not ground truth)"


def _import(tmp_path: Path, *args: str) -> tuple[list[dict[str, object]], list[str]]:
    done = ragproof("import", *args, "--out", "cases.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    write_config(tmp_path)
    valid = ragproof("validate", "-c", "ragproof.yaml", cwd=tmp_path)
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith(f"ok: ragproof.yaml: {len(lines)} case")
    return [json.loads(line) for line in lines], done.stdout.splitlines()


def test_ragas_jsonl(tmp_path: Path) -> None:
    cases, report = _import(tmp_path, str(DATA / "ragas.jsonl"))
    assert cases == [
        {
            "id": "case-0001",
            "question": "How long do refunds take?",
            "expected_answer": "Refunds are accepted within 30 days.",
            "metadata": {"reference_contexts": ["Refunds are accepted within 30 days."]},
        },
        {
            "id": "case-0002",
            "question": "When does support open?",
            "expected_answer": "Support is open 9 to 5 on weekdays.",
            "metadata": {
                "reference_contexts": ["Support is open 9 to 5 on weekdays."],
                "persona": "new customer",
            },
        },
    ]
    assert report[1:7] == [
        "  mapped   expected_answer <- reference: 2",
        "  mapped   metadata.reference_contexts <- reference_contexts: 2",
        "  mapped   question <- user_input: 2",
        "  kept     persona -> metadata.persona: 1",
        f"  dropped  response: 2 {DROPPED}",
        f"  dropped  retrieved_contexts: 2 {DROPPED}",
    ]


def test_ragas_v1_json_list_takes_the_first_ground_truth(tmp_path: Path) -> None:
    cases, report = _import(tmp_path, str(DATA / "ragas_v1.json"), "--format", "ragas")
    assert cases == [
        {"id": "case-0001", "question": "How long is the warranty?", "expected_answer": "12 months"},
        {
            "id": "case-0002",
            "question": "How fast do orders ship?",
            "expected_answer": "Within 2 business days.",
        },
    ]
    assert f"  dropped  answer: 2 {DROPPED}" in report and f"  dropped  contexts: 2 {DROPPED}" in report


def test_deepeval_json_and_csv(tmp_path: Path) -> None:
    cases, _ = _import(tmp_path, str(DATA / "deepeval.json"))
    assert cases == [
        {
            "id": "case-0001",
            "question": "Can I export a notebook?",
            "expected_answer": "Any member can export a notebook.",
            "tags": ["topic:backup"],
            "metadata": {
                "reference_contexts": ["Any member can export a notebook as Markdown files in a ZIP archive."]
            },
        }
    ]
    (tmp_path / "csv").mkdir()
    cases, report = _import(tmp_path / "csv", str(DATA / "deepeval.csv"), "--contexts-as-sources")
    assert cases == [
        {
            "id": "d1",
            "question": "Can I export a notebook?",
            "expected_source_ids": ["Any member can export a notebook as Markdown files."],
            "expected_answer": "Any member can export a notebook.",
        },
        {
            "id": "d2",
            "question": "Who can export a workspace?",
            "expected_source_ids": ["Workspace-wide exports are limited to owners."],
            "expected_answer": "Only owners.",
        },
    ]
    assert "  mapped   expected_source_ids <- context: 2" in report


def test_huggingface_squad_export(tmp_path: Path) -> None:
    cases, report = _import(tmp_path, str(DATA / "hf_squad.jsonl"))
    assert cases[0] == {
        "id": "5733be284776f41900661182",
        "question": "What character does the school have?",
        "expected_answer": "a Catholic character",
        "metadata": {
            "title": "University_of_Notre_Dame",
            "context": "Architecturally, the school has a Catholic character.",
        },
    }
    assert report[0] == (f"imported 2 case(s) from {DATA / 'hf_squad.jsonl'} (format hf) into cases.jsonl")
    assert "  mapped   expected_answer <- answers: 2" in report


def test_beir_graded_qrels_become_relevance(tmp_path: Path) -> None:
    cases, report = _import(tmp_path, str(DATA / "beir"))
    assert cases == [
        {
            "id": "q1",
            "question": "what is graded relevance",
            "expected_source_ids": ["d1", "d2"],
            "relevance": {"d1": 2.0, "d2": 1.0},
        },
        {"id": "q2", "question": "bm25 saturation", "expected_source_ids": ["d4", "d5"]},
    ]
    assert report[-4:] == [
        "  dropped  grade <= 0 judgments: 2 (unlisted ids have grade 0 already)",
        "  skipped  query 'q3': no document with a grade > 0",
        "  skipped  1 query(ies) without judgments in test.tsv",
        "wrote 2 cases to cases.jsonl",
    ]
    (tmp_path / "dev").mkdir()
    cases, _ = _import(tmp_path / "dev", str(DATA / "beir"), "--split", "dev")
    assert cases == [{"id": "q1", "question": "what is graded relevance", "expected_source_ids": ["d9"]}]


def test_trec_queries_and_qrels(tmp_path: Path) -> None:
    cases, _ = _import(
        tmp_path, str(DATA / "trec_queries.tsv"), "--format", "trec", "--qrels", str(DATA / "trec_qrels.txt")
    )
    assert cases == [
        {
            "id": "301",
            "question": "international organized crime",
            "expected_source_ids": ["FT934-5418", "FBIS3-10082"],
            "relevance": {"FT934-5418": 3.0, "FBIS3-10082": 1.0},
        },
        {
            "id": "302",
            "question": "poliomyelitis and post-polio",
            "expected_source_ids": ["FT922-1008", "LA061490-0135"],
        },
    ]


def test_field_flags_map_anything_else(tmp_path: Path) -> None:
    source = tmp_path / "mine.jsonl"
    source.write_text(json.dumps({"key": 7, "prompt": "Q?", "gold": "A.", "docs": ["x", "y"]}) + "\n")
    cases, report = _import(
        tmp_path, str(source), "--id", "key", "--question", "prompt", "--answer", "gold", "--sources", "docs"
    )
    assert cases == [
        {"id": "7", "question": "Q?", "expected_source_ids": ["x", "y"], "expected_answer": "A."}
    ]
    assert report[1:5] == [
        "  mapped   expected_answer <- gold: 1",
        "  mapped   expected_source_ids <- docs: 1",
        "  mapped   id <- key: 1",
        "  mapped   question <- prompt: 1",
    ]


@pytest.mark.parametrize(
    ("content", "args", "code", "message"),
    [
        (
            '{"prompt": "Q?"}\n',
            (),
            65,
            "IN:1: no question (looked for question, user_input, input, query; fields: prompt); name it with --question",
        ),
        (
            '{"question": "Q?", "ground_truth": 3.5}\n{"question": " "}\n',
            (),
            65,
            "IN:2: question: Value error, question is blank",
        ),
        (
            '{"question": "Q?", "ground_truth": [""]}\n',
            (),
            65,
            "IN:1: ground_truth: expected a non-empty string (or a list of them)",
        ),
        ('{"question": "Q?"}\n', ("--answer", "gold"), 65, "IN:1: no field 'gold' (fields: question)"),
        (
            '{"id": 1, "question": "A"}\n{"id": "1", "question": "B"}\n',
            (),
            65,
            "IN: duplicate case id '1' (records 1 and 2)",
        ),
        ('{"question": "Q?"\n', (), 65, "IN:1: malformed JSON (Expecting ',' delimiter at column 18)"),
    ],
)
def test_bad_records_are_one_line_with_file_line_and_field(
    tmp_path: Path, content: str, args: tuple[str, ...], code: int, message: str
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(content, encoding="utf-8")
    done = ragproof("import", str(source), *args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        code,
        f"ragproof: error: {message.replace('IN', str(source))}\n",
    )
    assert not (tmp_path / "cases.jsonl").exists()


def test_an_existing_output_is_kept_without_force(tmp_path: Path) -> None:
    (tmp_path / "cases.jsonl").write_text("keep\n")
    done = ragproof("import", str(DATA / "ragas.jsonl"), cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        64,
        "ragproof: error: --out cases.jsonl: exists; pass --force to overwrite it\n",
    )
    assert (tmp_path / "cases.jsonl").read_text() == "keep\n"
    assert ragproof("import", str(DATA / "ragas.jsonl"), "--force", cwd=tmp_path).returncode == 0


# The corpus the three files below were written against: chunk id -> (document, text).
CORPUS = {
    "refunds#0": ("refunds.md", "Refunds are accepted within 30 days of delivery."),
    "refunds#1": ("refunds.md", "A refund goes back to the card that paid, within 5 business days."),
    "shipping#0": (
        "shipping.md",
        "Orders ship within 2 business days; the carrier's tracking link comes by email.",
    ),
    "warranty#0": ("warranty.md", "The warranty lasts 12 months and covers manufacturing defects."),
}
CORPUS_PIPELINE = f"""
import re

CORPUS = {CORPUS!r}


def words(text):
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class Corpus:
    def retrieve(self, question, k):
        ranked = sorted(CORPUS, key=lambda i: (-len(words(question) & words(CORPUS[i][1])), i))
        return [{{"id": i, "text": CORPUS[i][1], "metadata": {{"source": CORPUS[i][0]}}}} for i in ranked[:k]]
"""


def _run_on_corpus(tmp_path: Path, run: dict[str, object]) -> list[dict[str, Any]]:
    """``ragproof run`` of the imported cases.jsonl against CORPUS; the rows."""
    import yaml

    (tmp_path / "corpus.py").write_text(CORPUS_PIPELINE, encoding="utf-8")
    config = {
        "dataset": "cases.jsonl",
        "adapter": {"type": "python", "target": "corpus:Corpus"},
        "run": {"k": 2, **run},
    }
    (tmp_path / "corpus.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = ragproof("run", "-c", "corpus.yaml", "--no-progress", "--out", "out", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "no retrieved chunk matched" not in done.stderr
    rows = (tmp_path / "out" / "rows.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(row) for row in rows]


def _hits(rows: list[dict[str, Any]]) -> list[object]:
    return [row["metrics"]["retrieval.hit_rate_at_k"]["value"] for row in rows]


def test_ragas_testset_csv_contexts_are_python_lists_and_match_the_corpus_by_substring(
    tmp_path: Path,
) -> None:
    cases, report = _import(tmp_path, str(DATA / "ragas_testset.csv"), "--contexts-as-sources")
    # pandas' to_csv writes each list as its Python repr: both quote styles are read as lists
    assert [c["expected_source_ids"] for c in cases] == [
        [CORPUS["refunds#0"][1], CORPUS["refunds#1"][1]],
        [CORPUS["shipping#0"][1]],
    ]
    assert cases[0]["metadata"] == {"synthesizer_name": "single_hop_specifc_query_synthesizer"}
    assert "  mapped   expected_source_ids <- reference_contexts: 2" in report
    assert report[-2:] == [
        "next: set run.source_match: substring (expected_source_ids are reference texts)",
        "wrote 2 cases to cases.jsonl",
    ]
    assert _hits(_run_on_corpus(tmp_path, {"source_match": "substring"})) == [1.0, 1.0]


def test_deepeval_csv_pipe_joined_contexts_are_split_and_source_file_names_the_document(
    tmp_path: Path,
) -> None:
    cases, report = _import(tmp_path, str(DATA / "deepeval_goldens.csv"))
    assert [(c["expected_source_ids"], c["metadata"]) for c in cases] == [
        (["warranty.md"], {"reference_contexts": [CORPUS["warranty#0"][1]]}),
        (["refunds.md"], {"reference_contexts": [CORPUS["refunds#1"][1], CORPUS["refunds#0"][1]]}),
    ]
    assert "  mapped   expected_source_ids <- source_file: 2" in report
    assert "  split    CSV list cells on '|'" in report
    rows = _run_on_corpus(tmp_path, {"source_match": "document", "document_id_key": "source"})
    assert _hits(rows) == [1.0, 1.0]

    (tmp_path / "texts").mkdir()
    cases, _ = _import(tmp_path / "texts", str(DATA / "deepeval_goldens.csv"), "--contexts-as-sources")
    assert [c["expected_source_ids"] for c in cases] == [
        [CORPUS["warranty#0"][1]],
        [CORPUS["refunds#1"][1], CORPUS["refunds#0"][1]],
    ]
    assert cases[0]["metadata"] == {"source_file": "warranty.md"}
    assert _hits(_run_on_corpus(tmp_path / "texts", {"source_match": "substring"})) == [1.0, 1.0]


def test_ragas_reference_context_ids_become_expected_source_ids(tmp_path: Path) -> None:
    cases, report = _import(tmp_path, str(DATA / "ragas_eval_ids.jsonl"))
    assert [c["expected_source_ids"] for c in cases] == [["warranty#0"], ["shipping#0"]]
    assert "  mapped   expected_source_ids <- reference_context_ids: 2" in report
    assert f"  dropped  retrieved_context_ids: 2 {DROPPED}" in report
    assert report[-2].startswith("next: set run.source_match: chunk (")
    assert _hits(_run_on_corpus(tmp_path, {"source_match": "chunk"})) == [1.0, 1.0]


def test_what_could_not_be_mapped_is_counted_with_a_short_example_never_mapped(tmp_path: Path) -> None:
    long = "x" * 300
    source = tmp_path / "odd.csv"
    source.write_text(
        "user_input,reference_contexts,ground_truths\n"
        f'Q1?,"[\'{long}\', oops]","[""A."", ""Another answer.""]"\n'
        'Q2?,"[""fine""]",A2.\n',
        encoding="utf-8",
    )
    done = ragproof("import", str(source), "--out", "cases.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = done.stdout.splitlines()
    assert "  mapped   metadata.reference_contexts <- reference_contexts: 1" in report  # Q2 only
    assert (
        "  lost     reference_contexts: 1 (neither a JSON nor a Python list; kept as "
        f'metadata.reference_contexts_unparsed), e.g. "[\'{"x" * 57}…"'
    ) in report
    assert (
        "  lost     ground_truths[1:]: 1 (reference answers beyond the first; expected_answer has one), "
        "e.g. 'Another answer.'"
    ) in report
    assert max(len(line) for line in report) < 200
    assert done.stderr == (
        "ragproof: warning: 2 values could not be carried over as they were (the 'lost' lines above)\n"
    )
    cases = [json.loads(line) for line in (tmp_path / "cases.jsonl").read_text().splitlines()]
    assert cases[0]["metadata"] == {"reference_contexts_unparsed": f"['{long}', oops]"}


def test_a_given_delimiter_splits_deepeval_loader_style_cells(tmp_path: Path) -> None:
    source = tmp_path / "semi.csv"
    source.write_text("input,expected_output,context\nQ?,A.,first text;second text\n", encoding="utf-8")
    cases, report = _import(tmp_path, str(source), "--context-delimiter", ";")
    assert cases[0]["metadata"] == {"reference_contexts": ["first text", "second text"]}
    assert report[-2].startswith("note: 1 case(s) have reference contexts but no expected_source_ids")


def test_the_no_match_warning_for_imported_texts_advises_substring_and_quotes_them_short(
    tmp_path: Path,
) -> None:
    import yaml

    _import(tmp_path, str(DATA / "ragas_testset.csv"), "--contexts-as-sources")
    (tmp_path / "corpus.py").write_text(CORPUS_PIPELINE, encoding="utf-8")
    config = {
        "dataset": "cases.jsonl",
        "adapter": {"type": "python", "target": "corpus:Corpus"},
        "run": {"k": 2},
    }
    (tmp_path / "corpus.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = ragproof("run", "-c", "corpus.yaml", "--no-progress", "--out", "out", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "ragproof: warning: no retrieved chunk matched any expected source id on 2 case(s) with "
        "source_match chunk: retrieved ids look like 'refunds#1', expected ids like "
        "'Refunds are accepted within 30 days of delivery.'; metadata keys seen: source; "
        "the expected ids look like texts: set run.source_match: substring\n"
    )
