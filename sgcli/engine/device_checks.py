"""Which accelerators sgcli's own forward has been checked on, so `--model-impl auto` trusts it there.

On a CPU the native forward is checked against transformers by the test suite. On CUDA or MPS
it never runs in this project's CI, so `auto` keeps transformers there until
`benchmarks/gpu_check.sh` has compared the two forwards on that very device (logits and greedy
choices, in one run), found them equal within the stated bounds, and measured the native decode
loop no slower than transformers' (single stream and batch 16), and written that here (on an H200,
2026-12-04, it was both: docs/notes/gpu.md). `--model-impl native` still runs it anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

from sgcli.cache.paths import atomic_write, cache_folder, cache_root
from sgcli.regular_files import read_regular


def checks_file() -> Path:
    return cache_root() / "checks" / "native-forward.json"


def device_key(device: str) -> str:
    """The device as its model and the torch build see it (`cuda:0` names no hardware)."""
    import torch

    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        return f"cuda {torch.cuda.get_device_name(index)} torch {torch.__version__}"
    return f"{device} torch {torch.__version__}"


def _read() -> dict:
    try:
        data = json.loads(read_regular(checks_file()))
    except (OSError, ValueError):
        return {}  # no check yet, or an unreadable file: nothing is trusted
    return data if isinstance(data, dict) else {}


def passed(device: str) -> bool:
    """True when gpu_check found the native forward right on this device with this torch, and no slower."""
    entry = _read().get(device_key(device))
    return isinstance(entry, dict) and entry.get("passed") is True and entry.get("faster") is True


def untrusted_reason(device: str) -> str | None:
    """Why `auto` runs transformers on `device` (None on the CPU or where the check passed)."""
    if device == "cpu" or passed(device):
        return None
    entry = _read().get(device_key(device))
    if isinstance(entry, dict) and entry.get("passed") is True:
        return (
            f"the native forward was checked on {device_key(device)} and measured slower than transformers "
            f"there ({entry.get('speed') or 'no speed recorded'}; benchmarks/gpu_check.sh)"
        )
    return (
        f"the native forward has not been checked against transformers on {device_key(device)} "
        "(benchmarks/gpu_check.sh checks it and records the result)"
    )


def record(device: str, result: dict) -> Path:
    """Store a check's result (`passed` plus its figures) for `device`."""
    data = _read()
    data[device_key(device)] = result
    path = checks_file()
    cache_folder(path.parent)
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True).encode("utf-8"))
    return path
