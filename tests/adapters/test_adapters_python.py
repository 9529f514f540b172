"""The python adapter: module:attr objects, classes, factories, async methods, clear import errors.

The pipeline runs in a worker process (python -m gate.adapters.worker): import errors surface
when the adapter starts, before any case; a call past the timeout kills the worker.
"""

from __future__ import annotations

import asyncio
import itertools
import textwrap
from pathlib import Path

import pytest
from frameworks import require
from run_helpers import run_one_case

from gate.adapters import build_adapter
from gate.adapters.base import AdapterError
from gate.adapters.python import PythonWorkerAdapter
from gate.core.environment import Environment
from gate.core.errors import UsageError
from gate.model.config import parse_config
from gate.model.dataset import Case
from gate.model.records import CaseOutput

_names = itertools.count()

PIPELINE = """
import asyncio

class Pipeline:
    def retrieve(self, question, k):
        return [{"id": f"c{i}", "text": question, "metadata": {"document_id": "d1"}} for i in range(k)]

    def answer(self, question):
        return {"text": "sync " + question, "citations": ["c0"]}

class AsyncPipeline:
    async def retrieve(self, question, k):
        await asyncio.sleep(0)
        return {"chunks": [{"id": "a1", "text": question}]}

    async def answer(self, question):
        return "async " + question

class RetrievalOnly:
    def retrieve(self, question, k):
        return []

class Broken:
    def retrieve(self, question, k):
        return {"id": "not a list"}

    def answer(self, question):
        raise ValueError("model not loaded")

instance = Pipeline()

def make_pipeline():
    return AsyncPipeline()

def not_a_pipeline():
    return 42
"""


def _write_module(directory: Path, source: str = PIPELINE) -> str:
    name = f"pipe_{next(_names)}"
    (directory / f"{name}.py").write_text(textwrap.dedent(source))
    return name


def _build(config_dir: Path, target: str, cwd: Path | None = None, retries: int = 2) -> PythonWorkerAdapter:
    config = parse_config(
        {"dataset": "cases.jsonl", "adapter": {"type": "python", "target": target, "retries": retries}},
        config_dir / "ragproof.yaml",
    )
    adapter = build_adapter(config, Environment(variables={}, cwd=cwd or config_dir), config_dir)
    assert isinstance(adapter, PythonWorkerAdapter)
    return adapter


def _run(adapter: PythonWorkerAdapter, question: str = "q?", k: int = 2) -> CaseOutput:
    return run_one_case(adapter, question, k)


def test_object_target_from_the_config_directory(tmp_path: Path) -> None:
    config_dir = tmp_path / "evals"
    config_dir.mkdir()
    module = _write_module(config_dir)
    out = _run(_build(config_dir, f"{module}:instance", cwd=tmp_path), "where?", k=3)
    assert [c.id for c in out.retrieved or []] == ["c0", "c1", "c2"]
    assert out.retrieved and out.retrieved[0].metadata == {"document_id": "d1"}
    assert out.answer is not None and out.answer.text == "sync where?" and out.answer.citations == ["c0"]
    assert out.supports_retrieve and out.supports_answer


def test_module_from_the_working_directory(tmp_path: Path) -> None:
    config_dir = tmp_path / "evals"
    config_dir.mkdir()
    module = _write_module(tmp_path)
    out = _run(_build(config_dir, f"{module}:Pipeline", cwd=tmp_path))
    assert out.answer is not None and out.answer.text == "sync q?"


def test_factory_with_async_methods(tmp_path: Path) -> None:
    module = _write_module(tmp_path)
    out = _run(_build(tmp_path, f"{module}:make_pipeline"), "hi")
    assert [c.id for c in out.retrieved or []] == ["a1"]
    assert out.answer is not None and out.answer.text == "async hi"


def test_retrieval_only_pipeline(tmp_path: Path) -> None:
    module = _write_module(tmp_path)
    out = _run(_build(tmp_path, f"{module}:RetrievalOnly"))
    assert out.supports_retrieve and not out.supports_answer
    assert out.retrieved == [] and out.answer is None


def test_exceptions_and_bad_results_are_adapter_errors(tmp_path: Path) -> None:
    module = _write_module(tmp_path)
    adapter = _build(tmp_path, f"{module}:Broken")

    async def failures() -> list[object]:
        await adapter.start()
        results = [
            await asyncio.gather(adapter.answer("q"), return_exceptions=True),
            await asyncio.gather(adapter.retrieve("q", 1), return_exceptions=True),
        ]
        await adapter.close()
        return [r[0] for r in results]

    answer_error, retrieve_error = asyncio.run(failures())
    assert (
        isinstance(answer_error, AdapterError)
        and str(answer_error) == "answer raised ValueError: model not loaded"
    )
    assert isinstance(retrieve_error, AdapterError)
    assert str(retrieve_error) == (
        'retrieve returned an object with keys id; expected a list of chunks or {"chunks": [...]}'
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon", "expected 'module:attr'"),
        ("missing_module_xyz:thing", "module 'missing_module_xyz' not found"),
        ("{module}:nothing", "has no attribute 'nothing'"),
        (
            "{module}:not_a_pipeline",
            r"\(int\) has neither a retrieve\(question, k\) nor an answer\(question\) method$",
        ),
    ],
)
def test_target_errors_are_one_line_usage_errors(tmp_path: Path, target: str, message: str) -> None:
    module = _write_module(tmp_path)
    with pytest.raises(UsageError, match=message) as info:
        _run(_build(tmp_path, target.format(module=module)))
    assert "\n" not in str(info.value)


def test_module_that_fails_to_import(tmp_path: Path) -> None:
    module = _write_module(tmp_path, "raise RuntimeError('no GPU')\n")
    with pytest.raises(UsageError, match=f"importing '{module}' failed: RuntimeError: no GPU"):
        _run(_build(tmp_path, f"{module}:x"))


HANGING = """
import os, pathlib, time

class Hanging:
    def retrieve(self, question, k):
        if question == "hang":
            pathlib.Path("hung.pid").write_text(str(os.getpid()))
            time.sleep(3600)
        if question == "slow":
            pathlib.Path("slow.started").write_text(str(os.getpid()))
            while not pathlib.Path("slow.go").exists():
                time.sleep(0.01)
        return [{"id": "c1", "text": question + " " + str(os.getpid())}]
"""


def test_a_cancelled_call_is_stopped_with_its_worker(tmp_path: Path) -> None:
    """A timeout (the runner cancels the case) kills the worker; the call does not run on."""
    module = _write_module(tmp_path, HANGING)
    adapter = _build(tmp_path, f"{module}:Hanging", retries=0)

    async def until(path: Path) -> None:
        while not path.exists():
            await asyncio.sleep(0.01)

    async def go() -> tuple[CaseOutput, CaseOutput]:
        await adapter.start()
        slow = asyncio.create_task(adapter.run_case(Case(id="s", question="slow"), 1))
        hung = asyncio.create_task(adapter.run_case(Case(id="h", question="hang"), 1))
        await until(tmp_path / "hung.pid")
        await until(tmp_path / "slow.started")
        hung.cancel()  # what asyncio.timeout in the runner does
        with pytest.raises(asyncio.CancelledError):
            await hung
        (tmp_path / "slow.go").write_text("")
        slow_output = await slow
        after = await adapter.run_case(Case(id="n", question="next"), 1)
        await adapter.close()
        return slow_output, after

    slow_output, after = asyncio.run(go())
    hung_pid = int((tmp_path / "hung.pid").read_text())
    assert not Path(f"/proc/{hung_pid}").exists()  # killed and reaped, not sleeping on
    assert adapter.starts == 2
    # The slow case, in flight on the killed worker, was sent again to the new one, although
    # retries is 0: being stopped for another case's timeout is not its failure.
    new_pid = (slow_output.retrieved or [])[0].text.split()[-1]
    assert new_pid != str(hung_pid)
    assert (after.retrieved or [])[0].text == f"next {new_pid}"


FRAMEWORK = """
from langchain_core.documents import Document

class Retriever:
    def retrieve(self, question, k):
        return [(Document(page_content="Refunds within 30 days.", metadata={"source": "doc-1"}, id="c1"), 0.25)]
"""


def test_framework_objects_cross_the_worker_boundary_converted(tmp_path: Path) -> None:
    require("langchain_core.documents")
    module = _write_module(tmp_path, FRAMEWORK)
    out = _run(_build(tmp_path, f"{module}:Retriever"))
    assert [c.model_dump(exclude_none=True) for c in out.retrieved or []] == [
        {"id": "c1", "text": "Refunds within 30 days.", "score": 0.25, "metadata": {"source": "doc-1"}}
    ]


@pytest.mark.parametrize(
    ("framework", "target", "message"),
    [
        (
            "python",
            "pipeline.py:Pipeline",
            # the config's and the working directory are one here: named once, with the fix
            "adapter.target: module 'pipeline.py' not found (searched {dir}); did you mean pipeline:Pipeline?",
        ),
        (
            "haystack",
            "pipeline:rag",
            "adapter.target: 'pipeline:rag' (Pipeline) has neither a retrieve(question, k) nor an "
            "answer(question) method; it is a Haystack object: use adapter.type: haystack",
        ),
    ],
)
def test_a_mistaken_target_or_type_names_the_fix(
    framework: str, target: str, message: str, tmp_path: Path
) -> None:
    import yaml
    from run_helpers import ragproof

    if framework != "python":
        require(framework)
    assert ragproof("init", "--framework", framework, cwd=tmp_path).returncode == 0
    config = yaml.safe_load((tmp_path / "ragproof.yaml").read_text())
    config["adapter"].update(type="python", target=target)
    (tmp_path / "ragproof.yaml").write_text(yaml.safe_dump(config))
    done = ragproof("validate", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        64,
        f"ragproof: error: {message.format(dir=tmp_path.resolve())}\n",
    )
