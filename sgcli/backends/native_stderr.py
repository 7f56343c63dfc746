"""Capture what native code writes to file descriptor 2.

Grammar libraries log warnings from C++/Rust straight to fd 2, bypassing Python's
sys.stderr. Left alone they leak into the user's terminal or JSONL. This redirects fd 2
into a temporary file for the duration of a block and hands back the lines.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def capture_fd2() -> Iterator[list[str]]:
    lines: list[str] = []
    try:
        sys.stderr.flush()
    except Exception:  # a closed or odd stderr must not break compilation
        pass
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", errors="replace")
            lines.extend(line for line in text.splitlines() if line.strip())
