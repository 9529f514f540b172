"""The LLM judge as a service: client, prompt templates, reply parsing, cache, cost, session.

The metrics that use it are in :mod:`gate.metrics.judged`; calibration against the
human-scored fixtures in :data:`FIXTURES_DIR` is :mod:`gate.run.calibration`.
"""

from pathlib import Path

FIXTURES_DIR = Path(__file__).parent / "fixtures"
