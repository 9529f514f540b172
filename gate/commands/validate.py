"""``ragproof validate``: check the config and the dataset without calling the pipeline."""

from __future__ import annotations

import argparse
import sys

from gate.commands._common import add_config_argument, count, load_config_from_args
from gate.core.environment import Environment

HELP = "check ragproof.yaml and the dataset (calls nothing)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_argument(parser)


def run(args: argparse.Namespace, env: Environment) -> int:
    from gate.adapters import check_adapter
    from gate.model.dataset import load_dataset
    from gate.run.scoring import select_metrics

    config = load_config_from_args(args, env)
    dataset = load_dataset(config.resolve(config.dataset), config.dataset_version)
    metric_names = select_metrics(config.run.metrics)
    warnings = check_adapter(config, env, [case.id for case in dataset.cases])
    for warning in warnings:
        print(f"ragproof: warning: {warning}", file=sys.stderr)
    print(
        f"ok: {args.config}: {count(len(dataset), 'case')} (dataset sha256 {dataset.sha256[:12]}), "
        f"adapter {config.adapter.type}, {len(metric_names)} metrics"
    )
    return 0
