"""Flag values checked before anything loads: a bad device is exit 2 in milliseconds, not exit 3 mid-load.

(The sampling flags' ranges are checked by their model, `sgcli.batch.sampling.SamplingParams.check`.)
"""

from __future__ import annotations

import re

from sgcli.errors import UserError, did_you_mean, plural
from sgcli.extras import require

DEVICES = ("auto", "cpu", "cuda", "mps")  # and cuda:N
_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")
DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's named placements

# --kernel: the CPU kernel of the native forward's matrix products (sgcli.engine.cpu_kernels)
TORCH_KERNEL = "torch"  # torch's own products (MKL in float32): nothing packed
F32_KERNEL = "onednn-f32"  # float32: oneDNN's packed kernel, for the pass widths it measured faster at
BF16_KERNEL = "onednn-bf16"  # bfloat16: packed products, prefills widened to float32
PREFILL_BF16_KERNEL = "onednn-bf16-prefill"  # bfloat16: packed products, prefills in torch's bfloat16
AMX_KERNEL = "onednn-bf16-amx"  # bfloat16: packed products, prefills in torch's bfloat16 on AMX tiles
KERNELS = ("auto", TORCH_KERNEL, F32_KERNEL, BF16_KERNEL, PREFILL_BF16_KERNEL, AMX_KERNEL)


def parse_device(value: str) -> str:
    """The one reading of a device name (--device, and `load_model`'s `device`): one of DEVICES or
    cuda:N, else exit 2 listing them. Syntax only: `check_device` asks torch whether it exists."""
    if _DEVICE.fullmatch(value):
        return value
    raise UserError(
        f"'{value}' is not one of auto, cpu, cuda, cuda:N, mps." + did_you_mean(value, DEVICES),
        hint="use auto, cpu, cuda, cuda:N or mps",
    )


def check_device(device: str) -> None:
    """A device that exists on this machine; CPU-only names never import torch."""
    parse_device(device)
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
            f"--device {device}: this machine has {plural(count, 'CUDA device')}",
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

    from sgcli.constraints.spec import TooDeep, loads_within_depth

    try:
        value = loads_within_depth(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{flag}: not valid JSON at column {exc.colno}: {exc.msg}", hint=f"give {expected}") from None
    except TooDeep as exc:
        raise UserError(f"{flag}: {exc}", hint=f"give {expected}") from None
    if not isinstance(value, dict):
        raise UserError(f"{flag} must be a JSON object, not {type(value).__name__}", hint=f"give {expected}")
    return value
