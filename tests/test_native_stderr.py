"""What native code writes to fd 2 during a compile comes back as lines, once, and fd 2 is restored."""

from __future__ import annotations

import os

import pytest

from sgcli.backends.native_stderr import capture_fd2
from sgcli.limits import LimitHit, run_bounded


def _fd2_identity() -> tuple[int, int]:
    st = os.fstat(2)
    return st.st_dev, st.st_ino


def test_each_capture_gets_its_own_lines_and_fd2_comes_back():
    before = _fd2_identity()
    with capture_fd2() as first:
        os.write(2, b"Warning: one\n\n  \nWarning: two\n")
    with capture_fd2() as second:  # the capture file is reused: nothing of the first may remain
        os.write(2, b"three\n")
    with capture_fd2() as quiet:
        pass
    assert first == ["Warning: one", "Warning: two"]
    assert second == ["three"] and quiet == []
    assert _fd2_identity() == before


def test_nested_captures_and_long_output():
    before = _fd2_identity()
    big = b"x" * 100_000 + b"\n"  # more than a pipe holds: the file takes it all
    with capture_fd2() as outer:
        os.write(2, b"outer before\n")
        with capture_fd2() as inner:
            os.write(2, big)
        os.write(2, b"outer after\n")
    assert inner == ["x" * 100_000]
    assert outer == ["outer before", "outer after"]
    assert _fd2_identity() == before


def test_in_a_bounded_child_the_last_words_before_an_abort_reach_the_parent():
    """A capture in a bounded child writes to the log its parent reads: Rust's allocation failure,
    printed inside a compile's capture just before it aborts, made the limit a 'crash' when lost."""

    def dies_in_a_capture():
        with capture_fd2():
            os.write(2, b"memory allocation of 589840 bytes failed\n")
            os.abort()

    def captures_and_returns():
        with capture_fd2() as lines:
            os.write(2, b"Warning: kept\n")
        return lines

    with pytest.raises(LimitHit) as hit:
        run_bounded(dies_in_a_capture, timeout_s=20, memory_mb=0)
    assert hit.value.kind == "memory" and "589840" in hit.value.detail
    assert run_bounded(captures_and_returns, timeout_s=20, memory_mb=0) == ["Warning: kept"]
