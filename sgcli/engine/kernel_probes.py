"""Kernel probes measured once per machine and remembered, not once per process.

Why: `cpu_kernels` picks some kernels by timing both candidates (`packed_float32_wins`, ...).
Timed in every process, a near tie could go either way with the machine's load, and in float32
the kernel decides the last bits of every sum: two runs of one request on one machine could
differ. Remembered, the first measurement on a machine (its CPU model, torch version and thread
count) decides for every later run; `sgcli cache clear kernels` measures again, and `--kernel`
pins a kernel outright.

The file is `kernels/cpu-kernels.json` in the cache folder: per machine, per probe, the verdict, both
timings and when they were taken. An unreadable file is reported and measured afresh; a cache
folder that cannot be written only means measuring in each process.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from sgcli.cache.paths import atomic_write, cache_folder, cache_root, notify
from sgcli.errors import plural
from sgcli.regular_files import read_regular

FILE = "cpu-kernels.json"
FORMAT = 1
_unwritable_noticed: set[Path] = set()


@dataclass(frozen=True)
class Measured:
    """One probe's answer: whether the candidate kernel wins, and the CPU seconds it was decided on."""

    wins: bool
    candidate_s: float
    baseline_s: float


def remembered(name: str, measure: Callable[[], Measured], machine: str) -> bool:
    """`measure()`'s verdict for `name` on `machine`, from the file when it was taken there before."""
    path = cache_root() / "kernels" / FILE
    machines = _read(path)
    known = machines.get(machine, {}).get(name)
    if isinstance(known, dict) and isinstance(known.get("wins"), bool):
        return known["wins"]
    result = measure()
    entry = asdict(result) | {"measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    machines.setdefault(machine, {})[name] = entry
    _write(path, machines)
    return result.wins


def machine_id(threads: int, torch_version: str) -> str:
    """What a probe's verdict depends on: the CPU model, the torch build, the threads it ran with."""
    return f"{_cpu_model()} | torch {torch_version} | {plural(threads, 'thread')}"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read(64 << 10)  # the first processor's block is enough
    except OSError:
        text = ""
    return describe_cpu(text) or platform.processor() or platform.machine() or "unknown CPU"


def describe_cpu(cpuinfo: str) -> str | None:
    """The first processor's model name in /proc/cpuinfo's text, with its family and model numbers:
    virtual machines of different CPU generations (Zen 1 to Zen 5, whose kernels' verdicts differ)
    can all be named "AMD EPYC". None where the text names no model."""
    fields: dict[str, str] = {}
    for line in cpuinfo.split("\n"):
        if not line.strip() and fields:
            break
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name")
    if not name:
        return None
    if fields.get("cpu family") and fields.get("model"):
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


def _read(path: Path) -> dict:
    try:
        data = json.loads(read_regular(path))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("machines"), dict):
        notify(f"kernel probe file {path} is unreadable or of another format: measuring again")
        return {}
    return data["machines"]


def _write(path: Path, machines: dict) -> None:
    try:
        cache_folder(path.parent)
        atomic_write(path, json.dumps({"format": FORMAT, "machines": machines}, indent=1).encode("utf-8"))
    except OSError as exc:
        if path.parent not in _unwritable_noticed:
            _unwritable_noticed.add(path.parent)
            notify(f"cannot write {path} ({exc.strerror or exc}): kernel probes are measured in every process")
