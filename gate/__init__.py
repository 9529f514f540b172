"""ragproof: a CI gate for retrieval-augmented generation pipelines."""

__version__ = "0.1.0"
