"""Helpers (`start_bounded(..., helper=True)`: the weights' dequantization, chat-template renders)
take turns on a machine of 2 cores or fewer, so that two never take the main process's core too:
each starts its work once the one before has finished, waits at most HELPER_WAIT_S, and its time
limit counts from the end of its wait."""

from __future__ import annotations

import time

import pytest

from sgcli import limits
from sgcli.limits import LimitHit, start_bounded


def _stamped(seconds: float):
    """A helper's work: sleep `seconds`, return (start, end) wall stamps."""

    def work():
        start = time.time()
        time.sleep(seconds)
        return [start, time.time()]

    return work


@pytest.fixture
def cores(monkeypatch):
    def set_cores(n: int) -> None:
        monkeypatch.setattr(limits, "_usable_cores", lambda: n)

    return set_cores


def test_on_two_cores_a_helper_starts_once_the_one_before_has_finished(cores):
    cores(2)
    first = start_bounded(_stamped(0.4), timeout_s=10, memory_mb=0, helper=True)
    second = start_bounded(_stamped(0.0), timeout_s=10, memory_mb=0, helper=True)
    (_, first_end), (second_start, _) = first.result(), second.result()
    assert second_start >= first_end - 0.01


def test_with_more_cores_helpers_run_at_once(cores):
    cores(8)
    first = start_bounded(_stamped(0.6), timeout_s=10, memory_mb=0, helper=True)
    second = start_bounded(_stamped(0.0), timeout_s=10, memory_mb=0, helper=True)
    (_, first_end), (second_start, _) = first.result(), second.result()
    assert second_start < first_end - 0.2


def test_a_helper_waits_for_a_stuck_one_at_most_helper_wait_s(cores, monkeypatch):
    cores(2)
    monkeypatch.setattr(limits, "HELPER_WAIT_S", 0.3)
    stuck = start_bounded(_stamped(30), timeout_s=60, memory_mb=0, helper=True)
    try:
        started = time.time()
        second_start, _ = start_bounded(_stamped(0.0), timeout_s=10, memory_mb=0, helper=True).result()
        assert 0.25 <= second_start - started < 5
    finally:
        stuck.cancel()


def test_a_cancelled_helper_lets_the_next_start_at_once(cores):
    cores(2)
    stuck = start_bounded(_stamped(30), timeout_s=60, memory_mb=0, helper=True)
    nxt = start_bounded(_stamped(0.0), timeout_s=10, memory_mb=0, helper=True)
    cancelled = time.time()
    stuck.cancel()
    second_start, _ = nxt.result()
    assert second_start - cancelled < 2


def test_a_waiting_helpers_time_limit_counts_from_the_end_of_its_wait(cores):
    """0.4 s of waiting plus 0.3 s of work, under a 0.5 s limit: no limit was passed."""
    cores(2)
    first = start_bounded(_stamped(0.4), timeout_s=10, memory_mb=0, helper=True)
    second = start_bounded(_stamped(0.3), timeout_s=0.5, memory_mb=0, helper=True)
    first.result()
    second.result()
    slow = start_bounded(_stamped(2.0), timeout_s=0.5, memory_mb=0, helper=True)
    with pytest.raises(LimitHit) as hit:
        slow.result()
    assert hit.value.kind == "time"
