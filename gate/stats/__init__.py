"""Statistics over numpy columns: pure mathematics, so every stage can use it.

:mod:`gate.stats.resampling` is the engine (shared resamples, bootstrap means, the
max-statistic); :mod:`gate.stats.intervals` chooses each gate's interval and builds the
tests and power figures on it; :mod:`gate.stats.agreement` holds Cohen's kappa. Their
public names are importable from ``gate.stats``.
"""

from __future__ import annotations

from gate.stats.agreement import (
    cohen_kappa,
)
from gate.stats.intervals import (
    BOOTSTRAP_MIN_NONZERO,
    CALIBRATED_MIN_PAIRS,
    MIN_CLUSTERS,
    POWER,
    ColumnFacts,
    GateMethod,
    cluster_standard_error,
    column_bounds,
    column_facts,
    drop_p_values,
    family_critical_value,
    load_root_finder,
    minimum_nonzero,
    no_change_halfwidth,
    normal_quantile,
    normal_tail,
    null_spread,
    pairs_needed,
    sign_flip_bound,
    sign_flip_p,
    t_quantile,
    tango_bounds,
    weighted_bh_cutoff,
)
from gate.stats.resampling import (
    BootstrapResult,
    bootstrap_means,
    upper_quantile,
)

__all__ = [
    "BOOTSTRAP_MIN_NONZERO",
    "BootstrapResult",
    "CALIBRATED_MIN_PAIRS",
    "ColumnFacts",
    "GateMethod",
    "MIN_CLUSTERS",
    "POWER",
    "bootstrap_means",
    "cluster_standard_error",
    "cohen_kappa",
    "column_bounds",
    "column_facts",
    "drop_p_values",
    "family_critical_value",
    "load_root_finder",
    "minimum_nonzero",
    "no_change_halfwidth",
    "normal_quantile",
    "normal_tail",
    "null_spread",
    "pairs_needed",
    "sign_flip_bound",
    "sign_flip_p",
    "t_quantile",
    "tango_bounds",
    "upper_quantile",
    "weighted_bh_cutoff",
]
