"""Where the external corpora are: $SGCLI_CORPORA, and nowhere else.

The benchmarks and the corpus tests read grammars and test suites from other projects.
A user's clone has none of them and nothing is guessed beside the checkout: `.ci/run`
sets SGCLI_CORPORA, and every reader asks here and says which corpus is absent, and why.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "SGCLI_CORPORA"


def corpus(name: str) -> Path | None:
    """One corpus folder by name ('gbnf', 'json-schema-test-suite', 'llguidance'); None when
    SGCLI_CORPORA is not set. The folder may still be absent: see `missing`."""
    root = os.environ.get(ENV)
    return Path(root).expanduser().resolve() / name if root else None


def missing(name: str) -> str | None:
    """Why the corpus cannot be read (a sentence naming it and the fix), or None when it can."""
    path = corpus(name)
    if path is None:
        return f"corpus '{name}' not available: {ENV} is not set (.ci/run sets it to the corpora folder)"
    if not path.is_dir():
        return f"corpus '{name}' not found at {path}: set {ENV} to the corpora folder"
    return None


def require(name: str) -> Path:
    """The corpus folder, or exit naming what is missing (for the benchmark scripts)."""
    reason = missing(name)
    if reason:
        raise SystemExit(reason)
    return corpus(name)


def json_files(folder: Path) -> list[Path]:
    """Every `*.json` file at any depth of a schema folder, sorted: a folder whose name ends in `.json`
    (the Schema Store tree has `mozilla/contribute.json/`) is no schema."""
    return sorted(p for p in Path(folder).rglob("*.json") if p.is_file())
