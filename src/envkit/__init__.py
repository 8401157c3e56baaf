"""envkit: declarative, verified GPU Python environments for vLLM."""

__version__ = "0.1.0"
