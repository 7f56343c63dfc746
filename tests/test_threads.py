"""`--threads` by default: the usable physical cores, less those other work keeps busy, at most 8."""

from __future__ import annotations

import pytest

from sgcli.engine import threads as th


@pytest.mark.parametrize(
    "usable, physical, busy, expected",
    [
        (2, 2, 0.0, 2),  # an idle 2-core machine: both (1.2-1.6x faster than one)
        (2, 2, 1.0, 1),  # the other core busy: one (two ran 3.2x slower there)
        (2, 2, 0.2, 2),  # a little background noise is not a busy core
        (2, 2, 0.3, 1),  # from a quarter on, it is
        (8, 8, 0.0, 8),
        (16, 16, 0.0, th.MAX_DEFAULT_THREADS),  # capped
        (8, 4, 0.0, 4),  # hyper-threads of one core count once
        (8, 4, 5.0, 3),
        (1, 1, 5.0, 1),  # at least one, however busy
        (4, 4, 9.0, 1),
    ],
)
def test_threads_for(usable, physical, busy, expected):
    assert th.threads_for(usable, physical, busy) == expected


def test_physical_cores_group_hyper_threads(tmp_path):
    for cpu, siblings in {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"}.items():
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "thread_siblings_list").write_text(siblings + "\n")
    assert th.physical_cores({0, 1, 2, 3}, tmp_path) == 2
    assert th.physical_cores({0, 1}, tmp_path) == 2
    assert th.physical_cores({0, 2}, tmp_path) == 1
    assert th.physical_cores({0, 7, 8}, tmp_path) == 3  # unreadable topology: a core each


def test_cgroup_quota(tmp_path):
    assert th.cgroup_cpu_quota(tmp_path) is None
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert th.cgroup_cpu_quota(tmp_path) is None
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert th.cgroup_cpu_quota(tmp_path) == 1.5
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert th.cgroup_cpu_quota(tmp_path) is None
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    assert th.cgroup_cpu_quota(tmp_path) == 2.0


@pytest.mark.parametrize(
    "line, online, usable, expected",
    [
        ("1.22 0.82 0.37 2/93 6079", 2, 2, 1.0),  # another task running: one CPU's worth
        ("0.10 0.05 0.01 3/93 6079", 2, 2, 0.1),  # a passing task while the average says idle
        ("3.00 2.00 1.00 1/93 6079", 2, 2, 0.0),  # the average of a run that just ended; nothing runs now
        ("4.00 4.00 4.00 5/93 6079", 8, 2, 1.0),  # 4 busy of 8 online CPUs: a half of our two
    ],
)
def test_busy_elsewhere(tmp_path, monkeypatch, line, online, usable, expected):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(line + "\n")
    monkeypatch.setattr(th.os, "cpu_count", lambda: online)
    no_children = tmp_path / "proc"  # this test process's own children (other tests' forks) are not the case here
    assert th.busy_elsewhere(usable, loadavg, no_children) == pytest.approx(expected)
    assert th.busy_elsewhere(usable, tmp_path / "missing", no_children) == 0.0


def _fake_proc(root, children: dict[str, str]):
    """A /proc with this process's one thread, whose children are `children` (pid -> state)."""
    (root / "self" / "task" / "7").mkdir(parents=True)
    (root / "self" / "task" / "7" / "children").write_text(" ".join(children) + " ")
    for pid, state in children.items():
        (root / pid).mkdir()
        (root / pid / "stat").write_text(f"{pid} (python3 (helper)) {state} 7 7 7 0 -1\n")


def test_own_children_are_not_load(tmp_path, monkeypatch):
    """The helpers this process forked (the weights, the prompts' render) end before the first step:
    one still running when the threads are chosen must not cost the whole run a core."""
    proc = tmp_path / "proc"
    _fake_proc(proc, {"101": "R", "102": "S", "103": "R"})
    assert th.running_children(proc) == 2
    assert th.running_children(tmp_path / "none") == 0
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("2.50 1.00 0.50 4/93 6079\n")  # this process, its two running helpers, one other task
    monkeypatch.setattr(th.os, "cpu_count", lambda: 2)
    assert th.busy_elsewhere(2, loadavg, proc) == pytest.approx(1.0)
    _fake_proc(tmp_path / "quiet", {"101": "R"})
    loadavg.write_text("2.50 1.00 0.50 2/93 6079\n")
    assert th.busy_elsewhere(2, loadavg, tmp_path / "quiet") == 0.0
    assert th.threads_for(2, 2, th.busy_elsewhere(2, loadavg, tmp_path / "quiet")) == 2


def test_a_real_child_at_work_is_counted():
    import os
    import time

    pid = os.fork()
    if pid == 0:
        end = time.monotonic() + 5
        while time.monotonic() < end:
            pass
        os._exit(0)
    try:
        deadline = time.monotonic() + 3
        while th.running_children() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert th.running_children() >= 1
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    assert th.running_children() == 0


def test_default_follows_omp_num_threads_where_set_and_stays_in_range():
    assert th.default_cpu_threads({"OMP_NUM_THREADS": "3"}) == 3
    n = th.default_cpu_threads({})
    assert 1 <= n <= min(th.MAX_DEFAULT_THREADS, len(th.usable_cpus()))
