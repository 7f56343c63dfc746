"""The external corpora for tests: found through SGCLI_CORPORA only, else one named skip.

A corpus test never passes without checking anything: an absent corpus skips with its
name and how to provide it; a present corpus with no files in the expected place fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from corpus_paths import corpus, missing  # noqa: E402


def require(name: str) -> Path:
    """The corpus folder, or a skip naming it (every absent-corpus skip comes from this one line)."""
    reason = missing(name)
    if reason:
        pytest.skip(reason)
    return corpus(name)


def files(name: str, sub: str, pattern: str) -> list:
    """Parameters for a test over a corpus' files: the files, or one placeholder that skips (by name)."""
    if missing(name):
        return [pytest.param(Absent(name), id=f"{name}-absent")]
    root = corpus(name)
    found = sorted((root / sub).glob(pattern))
    assert found, f"corpus '{name}' at {root} has no {sub}/{pattern}: is it the expected version?"
    return found


class Absent:
    """Stands in for a corpus file when the corpus is absent; `resolve` turns it into the skip."""

    def __init__(self, name: str):
        self.name = name


def resolve(path) -> Path:
    if isinstance(path, Absent):
        require(path.name)
    return path
