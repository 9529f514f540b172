"""docs/pipelines.md stays findable: the README links it right after the two commands.

(Every config key is documented once, in docs/reference/config.md, generated from the models;
tests/project/test_reference.py keeps it current.)"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_links_the_page_right_after_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands_end = readme.index("```\n", readme.index("```bash\n") + 8) + 4
    following = readme[commands_end:].lstrip("\n").split("\n\n")[0]
    assert "[docs/pipelines.md](docs/pipelines.md)" in following
