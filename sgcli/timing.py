"""Timing summaries shared by records, compare-backends, bench and the benchmarks (one definition of p50/p99)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float, digits: int | None = None) -> float | None:
    """The q-quantile (0 <= q <= 1) by nearest rank (no interpolation), rounded to `digits` when
    given; None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    value = ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
    return value if digits is None else round(value, digits)


def process_started() -> float | None:
    """The `time.perf_counter()` reading at which this process started (interpreter start-up and
    imports included), for start-to-first-token: from /proc on Linux (10 ms resolution), from psutil
    where installed; None where neither can say."""
    import time

    now = time.perf_counter()
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        import os

        return now - (uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))  # field 22: starttime, in ticks
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return now - (time.time() - psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - not installed, or no process table to read
        return None


def start_to_first_token_ms(first_token_at: float | None) -> float | None:
    """Milliseconds from process start to a token stamped `first_token_at` (perf_counter); None if unknown."""
    started = process_started()
    if first_token_at is None or started is None:
        return None
    return round((first_token_at - started) * 1000, 1)
