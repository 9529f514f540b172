"""Importing modules in a thread while the main thread works on something else.

``ragproof compare`` spends 0.4 s importing numpy, scipy and the decision modules and 0.8 s
reading two large artifacts. Much of an import is reading files and loading shared libraries,
which run beside the main thread's validation, so the imports overlap the reading.

Python's per-module import locks make concurrent imports safe as long as the two threads do
not import the same modules in opposite orders; callers start the thread only once the main
thread has imported everything its own work will import (the artifact reader and the metric
registry: ``tests/core/test_preload.py`` checks that reading imports nothing more).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence


class Preload:
    """A thread importing ``modules`` in order; :meth:`wait` joins it.

    An import that fails in the thread is left for the caller's own import statement to raise
    again, in the main thread, with its usual message.
    """

    def __init__(self, modules: Sequence[str]) -> None:
        self._modules = tuple(modules)
        self._thread = threading.Thread(target=self._run, name="ragproof-preload", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for name in self._modules:
            try:
                importlib.import_module(name)
            except Exception:
                return

    def wait(self) -> None:
        """Block until every module is imported (or one failed)."""
        self._thread.join()
