"""How many torch CPU threads to run when `--threads` is not given: what this machine offers now.

Measured on 2-core machines (docs/performance.md, "Threads and dtype"): idle, two threads ran a
decode step of the default model 1.2-1.6x faster than one; with the other core busy, two threads
ran 3.2x slower in float32 and 10x slower in bfloat16 (torch's intra-op threads wait on each other
at every small op, and OpenMP's waiting threads spin). Too few threads costs a fraction; too many
costs a multiple. So the default is the physical cores this process may use, less the cores other
work keeps busy right now, rounded down, capped at MAX_DEFAULT_THREADS, and at least 1; and since
work may start or end after the model loads, a `Governor` follows it between decode steps.

Only torch's intra-op threads are set (`torch.set_num_threads`: its OpenMP pool, MKL and oneDNN
follow it). The inter-op pool serves `torch.jit.fork`-style parallel ops, which eager decoding
never starts, so its threads are never created. `OMP_NUM_THREADS`, where the user set it, is the
default instead (the process-wide choice). sgcli does not touch `OMP_WAIT_POLICY`: OpenMP reads it
once, when torch is imported.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

# A 135M model's decode step is hundreds of small ops; past a few threads each adds waiting, not
# speed. Not measured past 2 cores here (issue 29): 8 keeps a many-core machine from spreading a small
# model thin; `--threads` goes higher.
MAX_DEFAULT_THREADS = 8
# Cores another task keeps busy are counted as whole ones from a quarter on: a busy core costs the
# threads that share it a multiple, an idle one a fraction, so the rounding leans towards fewer.
BUSY_NOISE = 0.25
LOADAVG_SAMPLES = 3  # runnable-task counts read a moment apart; the least, so a passing task is not load


def default_cpu_threads(environ=None) -> int:
    """The default for `--threads` (see the module's docstring)."""
    return default_threads(environ=environ)[0]


def default_threads(apply=None, environ=None) -> tuple[int, Governor | None]:
    """The default for `--threads`, and, given `apply` (what sets torch's threads), the `Governor` that
    follows it through the run: none where OMP_NUM_THREADS pins the count or one core is all there is."""
    pinned = pinned_threads(environ)
    if pinned is not None:
        return pinned, None
    cpus = usable_cpus()
    physical = physical_cores(cpus)
    threads = threads_for(len(cpus), physical, busy_elsewhere(len(cpus)))
    if apply is None or min(physical, len(cpus)) < 2:
        return threads, None
    return threads, Governor(threads, len(cpus), physical, apply)


def pinned_threads(environ=None) -> int | None:
    """The thread count OMP_NUM_THREADS pins (a whole number above 0), or None where it pins none."""
    given = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    return int(given) if given.isascii() and given.isdigit() and int(given) > 0 else None


def threads_for(usable: int, physical: int, busy: float) -> int:
    """Threads for `usable` CPUs on `physical` cores while `busy` CPUs' worth of other work runs."""
    free = math.floor(usable - busy + BUSY_NOISE)
    return max(1, min(physical, usable, free, MAX_DEFAULT_THREADS))


def usable_cpus() -> set[int]:
    """The CPUs this process may run on (its affinity), no more of them than a cgroup CPU quota pays for."""
    try:
        cpus = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        cpus = set(range(os.cpu_count() or 1))
    quota = cgroup_cpu_quota()
    if quota is not None and quota < len(cpus):
        cpus = set(sorted(cpus)[: max(1, math.floor(quota))])
    return cpus


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs' worth of time a cgroup quota allows (v2 `cpu.max`, v1 `cpu.cfs_quota_us`), or None."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


def physical_cores(cpus: set[int], root: Path = Path("/sys/devices/system/cpu")) -> int:
    """How many physical cores `cpus` lie on: hyper-threads of one core (same thread_siblings_list)
    count once; a CPU whose topology cannot be read counts as a core of its own."""
    cores = set()
    for cpu in cpus:
        try:
            cores.add((root / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text().strip())
        except OSError:
            cores.add(f"cpu{cpu}")
    return max(1, len(cores))


def busy_elsewhere(usable: int, loadavg: Path = Path("/proc/loadavg"), proc: Path = Path("/proc")) -> float:
    """CPUs' worth of other work on this process's CPUs, right now: the least of the 1-minute load
    average and the tasks runnable at this moment (less this one and its own children: the helpers
    that make the weights and render the prompts end before the first step), scaled from all online
    CPUs to ours. The average lags (a run that just ended still shows for a minute); the count is a
    snapshot (read LOADAVG_SAMPLES times, the least kept): work that is really there shows in both.
    0 where the system does not say."""
    sampled = _others_runnable(loadavg, proc, lambda: 1)  # this process: its main thread, choosing
    if sampled is None:
        return 0.0
    average, running = sampled
    return _ours(min(average, running), usable)


def _others_runnable(loadavg: Path, proc: Path, own) -> tuple[float, int] | None:
    """(the 1-minute load average, the least of LOADAVG_SAMPLES counts of the tasks runnable now less
    `own()` of this process's and its runnable children); None where the system does not say."""
    least = None
    for i in range(LOADAVG_SAMPLES):
        if i:
            time.sleep(0.001)
        try:
            fields = loadavg.read_text().split()
            average, runnable = float(fields[0]), int(fields[3].partition("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        others = runnable - own() - running_children(proc)
        least = others if least is None else min(least, others)
    return average, least


def _ours(busy: float, usable: int) -> float:
    """`busy` CPUs' worth of work over all online CPUs, as a share of this process's `usable` ones."""
    online = os.cpu_count() or usable
    return max(0.0, busy) * usable / max(online, usable)


def _own_tasks(proc: Path) -> list[Path]:
    """This process's threads' /proc folders (none where /proc does not say)."""
    try:
        return list((proc / "self" / "task").iterdir())
    except OSError:
        return []


def _runnable(stat: Path) -> bool:
    """Whether the task whose `stat` file this is is runnable now (False where it cannot be read)."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, IndexError):
        return False


def running_threads(proc: Path = Path("/proc")) -> int:
    """How many of this process's own threads are runnable now (torch's spinning OpenMP threads
    among them); 0 where /proc does not say."""
    return sum(_runnable(task / "stat") for task in _own_tasks(proc))


def busy_now(usable: int, loadavg: Path = Path("/proc/loadavg"), proc: Path = Path("/proc")) -> float:
    """CPUs' worth of other work on this process's CPUs while this process runs its own threads: the
    tasks runnable at this moment less this process's runnable threads and children (the least of
    LOADAVG_SAMPLES readings), scaled as in `busy_elsewhere`. The load average is no use here: this
    process's own threads are in it. 0 where the system does not say."""
    sampled = _others_runnable(loadavg, proc, lambda: max(1, running_threads(proc)))  # the reader itself runs
    return 0.0 if sampled is None else _ours(sampled[1], usable)


class Governor:
    """torch's CPU threads, followed through a run: the default is chosen when the model loads, and
    work that starts later would share a core with one of its threads, which OpenMP keeps spinning
    between the step's small parallel regions (docs/performance.md, "Threads and dtype": beside one
    CPU-bound process, 2 threads kept 32% of their idle throughput where 1 kept 71%). The decode loops
    call `tick` between steps; every INTERVAL_S it reads what other work keeps busy now and sets the
    threads `threads_for` gives (1 up to what the machine offers idle), once two readings in a row
    agree. A pinned count (--threads, OMP_NUM_THREADS) installs no governor."""

    INTERVAL_S = 1.0

    def __init__(self, current: int, usable: int, physical: int, apply, *, clock=time.monotonic, busy=None):
        self.current, self.usable, self.physical, self.apply, self.clock = current, usable, physical, apply, clock
        self.busy = busy or (lambda: busy_now(usable))
        self.next_check = clock() + self.INTERVAL_S
        self.proposed: int | None = None
        self.changes: list[int] = []  # the counts set, in order (records, tests)

    def tick(self) -> None:
        now = self.clock()
        if now < self.next_check:
            return
        self.next_check = now + self.INTERVAL_S
        wanted = threads_for(self.usable, self.physical, self.busy())
        if wanted == self.current:
            self.proposed = None
        elif wanted != self.proposed:
            self.proposed = wanted  # a passing task is not load: the next reading must say it too
        else:
            self.apply(wanted)
            self.current, self.proposed = wanted, None
            self.changes.append(wanted)


_governor: Governor | None = None


def govern(governor: Governor | None) -> None:
    """Install the governor the decode loops tick (None: threads stay as set)."""
    global _governor
    _governor = governor


def tick() -> None:
    """Between two decode steps: let the installed governor follow the machine's load (see `Governor`)."""
    if _governor is not None:
        _governor.tick()


def changes() -> list[int]:
    """The thread counts the installed governor set, in order (empty: none, or no governor)."""
    return [] if _governor is None else list(_governor.changes)


def current(given: int | None) -> int | None:
    """The threads running now: the governor's count where one is installed, else `given`."""
    return given if _governor is None else _governor.current


def running_children(proc: Path = Path("/proc")) -> int:
    """How many of this process's children are runnable now (Linux's per-thread `children` lists and
    each child's state); 0 where /proc does not say."""
    count = 0
    for task in _own_tasks(proc):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        count += sum(_runnable(proc / pid / "stat") for pid in children)
    return count
