"""Where the external corpora are: $SGCLI_CORPORA, else ../shared/corpora beside the checkout.

The benchmarks and the corpus tests read grammars and test suites from other projects;
a bare clone has none of them, so every reader asks here and says which corpus is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT.parent / "shared" / "corpora"


def corpora_root() -> Path:
    """The corpora folder (it may not exist: callers check the corpus they need)."""
    env = os.environ.get("SGCLI_CORPORA")
    return Path(env).expanduser().resolve() if env else DEFAULT


def corpus(name: str) -> Path:
    """One corpus folder by name, e.g. 'gbnf', 'json-schema-test-suite', 'llguidance'."""
    return corpora_root() / name
