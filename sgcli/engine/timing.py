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
