"""Start-to-first-token: the process start is read from the OS, and records carry the time from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_process_started_counts_the_time_before_sgcli_was_imported():
    code = (
        "import time; time.sleep(0.6)\n"
        "from sgcli.timing import process_started\n"
        "print(time.perf_counter() - process_started())"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout)
    assert 0.6 <= age < 60  # the sleep before the import is counted (the upper bound only rules out nonsense)


def test_record_carries_start_to_first_token(tiny_lm, smol_tokenizer):
    from helpers import generate_with

    from sgcli.constraints.spec import ConstraintSpec, Kind

    record = generate_with(tiny_lm, smol_tokenizer, ConstraintSpec(Kind.REGEX, "(yes|no)", "test"), max_tokens=8)
    t = record["timings"]
    assert record["usage"]["completion_tokens"] >= 1
    # this pytest process started before the decode did: at least the decode's wait for its first token
    assert t["start_to_first_token_ms"] >= t["first_token_ms"]
