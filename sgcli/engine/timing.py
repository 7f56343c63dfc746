"""Timing summaries shared by records, compare-backends and the benchmarks (one definition of p50/p99)."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float], q: float, digits: int = 4) -> float | None:
    """The q-quantile (0 <= q <= 1) by nearest rank, no interpolation, rounded; None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], digits)
