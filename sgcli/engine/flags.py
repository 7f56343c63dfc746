"""Flag values checked before anything loads: a bad number is exit 2 in milliseconds, not exit 3 mid-decode."""

from __future__ import annotations

import math
import re

from sgcli.errors import UserError
from sgcli.extras import require

MAX_TEMPERATURE = 100.0  # far past the point where sampling is uniform over the allowed tokens
MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed's range


def check_sampling(
    *, temperature: float, top_p: float = 1.0, top_k: int = 0, seed: int | None = 0, max_tokens: int = 1
) -> None:
    """Every sampling flag in range, or a UserError naming the flag and its range."""
    if not math.isfinite(temperature) or not 0 <= temperature <= MAX_TEMPERATURE:
        raise UserError(
            f"--temperature {temperature} is out of range",
            hint=f"give a number from 0 (greedy) to {MAX_TEMPERATURE:g}, e.g. --temperature 0.7",
        )
    if not math.isfinite(top_p) or not 0 < top_p <= 1:
        raise UserError(f"--top-p {top_p} is out of range", hint="give a number in (0, 1], e.g. --top-p 0.9")
    if top_k < 0:
        raise UserError(f"--top-k {top_k} is negative", hint="give 0 (off) or a positive count, e.g. --top-k 40")
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise UserError(f"--seed {seed} is out of range", hint=f"give an integer from 0 to {MAX_SEED}")
    if max_tokens < 1:
        raise UserError(f"--max-tokens {max_tokens}: must be at least 1", hint="e.g. --max-tokens 256")


_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's named placements


def check_device(device: str) -> None:
    """A device that exists on this machine; CPU-only names never import torch."""
    if not _DEVICE.fullmatch(device):
        raise UserError(f"unknown device '{device}'", hint="use auto, cpu, cuda, cuda:N or mps")
    if device in ("auto", "cpu"):
        return
    import torch

    if device == "mps":
        if not torch.backends.mps.is_available():
            raise UserError(
                "--device mps: torch sees no Apple GPU (MPS) on this machine", hint="use --device cpu or auto"
            )
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise UserError(
            f"--device {device}: torch sees no CUDA device on this machine", hint="use --device cpu or auto"
        )
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        raise UserError(
            f"--device {device}: this machine has {count} CUDA device{'s' if count != 1 else ''}",
            hint=f"use cuda:0 to cuda:{count - 1}, or --device auto",
        )


def parse_device_map(text: str | None, device: str = "auto") -> str | dict | None:
    """--device-map: a placement accelerate names (auto...) or a JSON object {module: device}; it
    needs `accelerate` and replaces --device, so both together are exit 2."""
    if text is None:
        return None
    if text in DEVICE_MAPS:
        value: str | dict = text
    else:
        value = json_object(text, "--device-map", f"{' / '.join(DEVICE_MAPS)} or a JSON object")
    if device != "auto":
        raise UserError(
            f"--device {device} and --device-map both place the model", hint="give one of them (drop --device)"
        )

    require("generate", "--device-map")  # accelerate is in the generate extra
    return value


def json_object(text: str, flag: str, expected: str = "a JSON object") -> dict:
    """`text` parsed as a JSON object, or exit 2 naming the flag and where the JSON breaks."""
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{flag}: not valid JSON at column {exc.colno}: {exc.msg}", hint=f"give {expected}") from None
    if not isinstance(value, dict):
        raise UserError(f"{flag} must be a JSON object, not {type(value).__name__}", hint=f"give {expected}")
    return value
