"""sgcli: structured generation and grammar development for language models."""

__version__ = "0.1.0"
