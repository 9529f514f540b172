"""ragproof: a CI gate for retrieval-augmented generation pipelines."""

__version__ = "0.1.0"

# The name pip installs this project under (the command stays ``ragproof``, the package ``gate``).
# The registry's "ragproof" is an unrelated project, so no install line may name it.
DISTRIBUTION = "ragproof-gate"


def requirement(extra: str = "") -> str:
    """The pip requirement for this project, with ``extra`` (e.g. ``haystack``) when given."""
    return f"{DISTRIBUTION}[{extra}]" if extra else DISTRIBUTION
