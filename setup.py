"""Build hook: ship the bundled example (examples/demo) inside the wheel as ``gate/_demo``.

Everything else about the package lives in pyproject.toml. Editable installs find the demo in
the source checkout, so the copy is made only for regular builds.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithDemo(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        source = Path(__file__).parent / "examples" / "demo"
        if source.is_dir():
            target = Path(self.build_lib) / "gate" / "_demo"
            shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))


setup(cmdclass={"build_py": BuildPyWithDemo})
