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


def test_busy_now_leaves_out_this_processs_own_threads(tmp_path, monkeypatch):
    """Mid-run the load average holds this process's own threads; what counts is the tasks runnable now
    less its runnable threads (torch's spinning OpenMP thread among them) and children."""
    proc = tmp_path / "proc"
    _fake_proc(proc, {"101": "S"})
    for tid, state in (("8", "R"), ("9", "S")):
        (proc / "self" / "task" / tid).mkdir()
        (proc / "self" / "task" / tid / "stat").write_text(f"{tid} (python3) {state} 7 7 7 0 -1\n")
    (proc / "self" / "task" / "7" / "stat").write_text("7 (python3) R 1 7 7 0 -1\n")
    assert th.running_threads(proc) == 2
    monkeypatch.setattr(th.os, "cpu_count", lambda: 2)
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("2.00 2.00 2.00 2/93 6079\n")  # our two threads, nothing else
    assert th.busy_now(2, loadavg, proc) == 0.0
    loadavg.write_text("3.00 2.00 2.00 3/93 6079\n")  # and one other task
    assert th.busy_now(2, loadavg, proc) == pytest.approx(1.0)
    assert th.busy_now(2, tmp_path / "missing", proc) == 0.0


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_governor_follows_load_that_comes_and_goes():
    """Two threads chosen idle; a CPU-bound task starts: after two readings that agree, one thread; it ends:
    two again. Readings come at most every INTERVAL_S, and a single passing task changes nothing."""
    clock, load, applied = _Clock(), [0.0], []
    gov = th.Governor(2, 2, 2, applied.append, clock=clock, busy=lambda: load[0])

    def at(t):
        clock.now = t
        gov.tick()

    at(0.5)  # before the first interval: not read
    load[0] = 1.0
    at(0.9)
    assert applied == [] and gov.current == 2
    at(1.0)  # first reading of the new load: proposed only
    assert applied == []
    load[0] = 0.0
    at(2.0)  # it was passing: nothing changes
    load[0] = 1.0
    at(3.0)
    at(3.5)  # within the interval: not read
    assert applied == []
    at(4.0)  # second reading in a row: one thread
    assert applied == [1] and gov.current == 1 and th.threads_for(2, 2, 1.0) == 1
    load[0] = 0.0
    at(5.0)
    at(6.0)
    assert applied == [1, 2] and gov.changes == [1, 2] and gov.current == 2


def test_a_pinned_count_gets_no_governor_and_records_say_what_ran(monkeypatch):
    monkeypatch.setattr(th, "busy_elsewhere", lambda usable: 0.0)
    assert th.default_threads(lambda n: None, {"OMP_NUM_THREADS": "2"}) == (2, None)
    monkeypatch.setattr(th, "usable_cpus", lambda: {0})
    assert th.default_threads(lambda n: None, {}) == (1, None)  # one core: nothing to follow
    monkeypatch.setattr(th, "usable_cpus", lambda: {0, 1})
    monkeypatch.setattr(th, "physical_cores", lambda cpus: 2)
    assert th.default_threads(None, {}) == (2, None)  # asked for the count alone (sgcli config)
    threads, gov = th.default_threads(lambda n: None, {})
    assert threads == 2 and isinstance(gov, th.Governor) and gov.current == 2
    try:
        th.govern(gov)
        gov.current, gov.changes = 1, [1]
        assert th.current(2) == 1 and th.changes() == [1]
    finally:
        th.govern(None)
    assert th.current(2) == 2


def test_the_decode_loops_tick_between_steps(sharp_native, smol_tokenizer, monkeypatch):
    """Both loops (one request, a batch) let the governor read the load between their steps, and the
    records say how many threads ran last."""
    import batch_cases as cases

    ticks = []
    monkeypatch.setattr(th, "_governor", type("Counting", (), {"tick": lambda self: ticks.append(1), "current": 1})())
    session = cases.session_for(sharp_native, smol_tokenizer, cases.json_spec())
    requests = cases.make_requests()[:4]
    single = cases.sequential(session, requests[:1])
    assert len(ticks) >= 2 and single[0]["timings"]["threads"] == 1
    ticks.clear()
    records = list(session.batch(requests, batch_size=4))
    assert len(ticks) >= 2 and all(r["timings"]["threads"] == 1 for r in records)


def test_omp_num_threads_takes_ascii_digits_only():
    """`OMP_NUM_THREADS=²` passed str.isdigit and int() raised; `٣` was read as 3."""
    assert th.pinned_threads({"OMP_NUM_THREADS": "²"}) is None
    assert th.pinned_threads({"OMP_NUM_THREADS": "٣"}) is None
    assert th.pinned_threads({"OMP_NUM_THREADS": "3"}) == 3
