"""``ragproof calibrate``: the configured judge's agreement with human-scored fixtures, per prompt."""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.core.environment import Environment
from gate.core.errors import EXIT_FAILED, EXIT_OK, UsageError, pydantic_message
from gate.model.config import (
    CalibrationConfig,
    Config,
    JudgeConfig,
    RunConfig,
    apply_env_overrides,
    load_config,
)

HELP = "measure the judge's agreement with human-scored fixtures (exit 1 below the thresholds)"
DEFAULT_CONFIG = "ragproof.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help=f"ragproof.yaml (default: {DEFAULT_CONFIG} when present, else the RAGPROOF_JUDGE_* variables alone)",
    )
    parser.add_argument(
        "--fixtures",
        metavar="DIR",
        help="fixtures directory (default: calibration.fixtures, else the bundled set)",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the judge cache")


def _resolve(env: Environment, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else env.cwd / p


def _settings(
    args: argparse.Namespace, env: Environment
) -> tuple[JudgeConfig, CalibrationConfig, Path, Path | None]:
    """(judge, calibration, store path, fixtures dir from the config) from the config file or the environment."""
    path = _resolve(env, args.config or DEFAULT_CONFIG)
    if args.config is not None or path.is_file():
        config: Config = load_config(path, env.variables)
        fixtures = config.resolve(config.calibration.fixtures) if config.calibration.fixtures else None
        return config.judge, config.calibration, _resolve(env, config.run.store), fixtures
    # No config file: a judge defined by RAGPROOF_* variables alone (e.g. a prompt-change CI job).
    data = apply_env_overrides({}, env.variables)
    try:
        judge = JudgeConfig.model_validate(data.get("judge", {}))
    except ValueError as exc:
        raise UsageError(f"RAGPROOF_JUDGE_* variables: {pydantic_message(exc)}") from None
    return judge, CalibrationConfig(), _resolve(env, RunConfig().store), None


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.judge import FIXTURES_DIR
    from gate.judge.session import build_judge
    from gate.run.calibration import calibrate, load_fixtures, passes, render_table

    judge_config, thresholds, store, configured_fixtures = _settings(args, env)
    fixtures_dir = _resolve(env, args.fixtures) if args.fixtures else (configured_fixtures or FIXTURES_DIR)
    fixtures = load_fixtures(fixtures_dir)
    session = build_judge(judge_config, env, store, not args.no_cache)
    if session is None:
        raise UsageError("calibrate needs a judge: set judge.model in ragproof.yaml or RAGPROOF_JUDGE_MODEL")
    try:
        results = calibrate(session, fixtures)
        cost = session.cost()
    finally:
        session.close()
    ok = passes(results, thresholds.min_exact, thresholds.min_within_band)
    print(f"judge {judge_config.model}: agreement with {sum(r.items for r in results)} human-scored fixtures")
    print()
    print(render_table(results, thresholds.min_exact, thresholds.min_within_band))
    print()
    print(
        f"{'passed' if ok else 'FAILED'}: thresholds exact >= {100 * thresholds.min_exact:.0f}%, "
        f"within band >= {100 * thresholds.min_within_band:.0f}% per prompt; "
        f"{cost.judge_calls} judge calls, {cost.cache_hits} cached, ${cost.usd:.4f}"
    )
    for r in results:
        if r.disagreements:
            print(f"  {r.prompt}: disagreed on {', '.join(r.disagreements)}")
    return EXIT_OK if ok else EXIT_FAILED
