"""``ragproof init``: a commented ragproof.yaml, a starter dataset, the PR workflow and a pipeline stub.

The stub is for the first framework found installed (LangChain, then LlamaIndex, then
Haystack), else a plain python pipeline; ``--framework`` chooses. As written, everything
passes ``ragproof validate`` and ``ragproof run``: the stub retrieves placeholder notes and answers
"I don't know." until it is edited. Existing files are never overwritten without ``--force``;
a requirements.txt is written only when there is none (the workflow installs it), and the
entries for ragproof's output directories are added to .gitignore when missing. A framework
chosen with ``--framework`` that is not installed is written anyway, with a line on stderr
saying what to install.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from gate import requirement
from gate.commands._common import resolve
from gate.core.environment import Environment
from gate.core.errors import UsageError

HELP = "write a starter ragproof.yaml, dataset, GitHub workflow and pipeline stub"

FILES_DIR = Path(__file__).with_name("init_files")
WORKFLOW = Path(".github") / "workflows" / "ragproof.yml"
# ragproof's own output: the default run directory and the judge cache (.ragproof/), and the
# directory docs/running.md uses for named runs (runs/). Never meant to be committed.
IGNORED = (".ragproof/", "runs/")


@dataclass(frozen=True)
class Stub:
    """What ``init`` writes for one kind of pipeline."""

    module: str  # importable when the framework is installed
    target: str
    requirement: str
    document_id_key: str | None
    comments: tuple[str, ...] = ()


STUBS: dict[str, Stub] = {
    "langchain": Stub(
        "langchain_core",
        "pipeline:chain",
        requirement("langchain"),
        "source",
        (
            "a Runnable whose output has 'answer' and 'context' (or a retriever); see",
            "answer_output, documents_output and inputs in docs/pipelines.md",
        ),
    ),
    "llamaindex": Stub(
        "llama_index.core",
        "pipeline:query_engine",
        requirement("llamaindex"),
        None,
        ("a query engine, an index or a retriever; a node's ref_doc_id is its document id",),
    ),
    "haystack": Stub(
        "haystack",
        "pipeline:rag",
        requirement("haystack"),
        "source",
        ("a Pipeline; name inputs / documents_output / answer_output when the graph has several",),
    ),
    "python": Stub(
        "",
        "pipeline:Pipeline",
        "",
        None,
        ("an object, class or factory with retrieve(question, k) and answer(question)",),
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", nargs="?", default=".", help="where to write (default: the working directory)"
    )
    parser.add_argument(
        "--framework",
        choices=("auto", *STUBS),
        default="auto",
        help="the pipeline stub to write (default: the first framework installed, else python)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that does not import, or one blocked in sys.modules
        return False


def detect_framework() -> str:
    """The first of langchain, llamaindex, haystack whose package is importable, else ``python``."""
    return next((name for name, stub in STUBS.items() if stub.module and _installed(stub.module)), "python")


def render_config(framework: str) -> str:
    """The starter ragproof.yaml for ``framework`` (a jinja2 template with its comments)."""
    import jinja2

    stub = STUBS[framework]
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = environment.from_string((FILES_DIR / "ragproof.yaml.j2").read_text(encoding="utf-8"))
    return template.render(
        type=framework,
        target=stub.target,
        adapter_comments=stub.comments,
        document_id_key=stub.document_id_key,
    )


def _ignore_outputs(path: Path) -> None:
    """Add the ``IGNORED`` entries missing from the .gitignore at ``path`` (creating it)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [entry for entry in IGNORED if entry not in present and entry.rstrip("/") not in present]
    if not missing:
        return
    if text and not text.endswith("\n"):
        text += "\n"
    text += "# ragproof's runs and judge cache\n" + "".join(f"{entry}\n" for entry in missing)
    path.write_text(text, encoding="utf-8")
    print(f"{'updated' if present else 'wrote'} {path}")


def run(args: argparse.Namespace, env: Environment) -> int:
    directory = resolve(env, args.directory)
    framework = detect_framework() if args.framework == "auto" else args.framework
    stub = STUBS[framework]
    files = {
        Path("ragproof.yaml"): render_config(framework),
        Path("cases.jsonl"): (FILES_DIR / "cases.jsonl").read_text(encoding="utf-8"),
        Path("pipeline.py"): (FILES_DIR / f"pipeline_{framework}.py.txt").read_text(encoding="utf-8"),
        WORKFLOW: (FILES_DIR / "workflow.yaml").read_text(encoding="utf-8"),
    }
    existing = [str(path) for path in files if (directory / path).exists()]
    if existing and not args.force:
        raise UsageError(f"{directory}: {', '.join(existing)} exist(s); pass --force to overwrite")
    if not (directory / "requirements.txt").exists():
        files[Path("requirements.txt")] = (
            f"# What the pipeline needs; the workflow installs it before the run.\n{stub.requirement}\n"
            if stub.requirement
            else "# What the pipeline needs; the workflow installs it before the run.\n"
        )
    for path, text in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    _ignore_outputs(directory / ".gitignore")
    if stub.module and not _installed(stub.module):
        print(
            f"ragproof: warning: {framework} is not installed here ({stub.module} does not import); "
            f"`ragproof validate` needs it: pip install '{stub.requirement}'",
            file=sys.stderr,
        )
    print(
        f"pipeline stub: {framework}. Next: edit pipeline.py and cases.jsonl, then "
        "`ragproof validate` and `ragproof run`; docs/pipelines.md walks through it."
    )
    return 0
