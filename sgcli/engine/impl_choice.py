"""Whose forward runs a model: sgcli's native one or transformers', decided in one place from the
model's files, the device and what the user asked for (`--model-impl`), before any weights load.
"""

from __future__ import annotations

import json
from pathlib import Path

from sgcli.engine import checkpoint, device_checks
from sgcli.engine.gguf_convert import Progress, convert_gguf
from sgcli.errors import UserError
from sgcli.models.refs import ModelRef


def choose_impl(
    ref: ModelRef, impl: str, placement: dict, device: str, progress: Progress | None = None
) -> tuple[bool, str | None]:
    """The one place that decides whose forward runs `ref` on `device`: (whether the native forward
    does, why auto chose transformers). transformers where asked for; else the native forward where
    the model fits it (`llama.misfit` on the checkpoint's config: a folder's, a hub id's local
    snapshot's, a .gguf's conversion, made here once and cached) and, under auto on an accelerator,
    only where benchmarks/gpu_check.sh has checked it (`engine/device_checks.py`). Asking for the
    native forward where it cannot run is exit 2, saying why; so is a config neither forward can run
    (`families.unrunnable`), under every impl, before any weights are read."""
    folder = native_folder(ref, progress)  # a .gguf's conversion: made here, as either forward needs it
    _refuse_unrunnable(folder)
    if impl == "transformers":
        return False, None
    why = _native_misfit(ref, folder, placement)
    if why is not None and impl == "native":
        raise _native_refused(ref.display, why)
    if why is None and impl == "auto":
        why = device_checks.untrusted_reason(device)
    return why is None, why


def _refuse_unrunnable(folder: Path | None) -> None:
    """Exit 2 naming the config file and its keys where neither forward can run the model: else
    transformers fails deep in its forward (a tensor size mismatch, a ValueError from its masks) and
    the run ends as an internal error. A hub model not yet in the local cache is checked by the probe
    pass `runtime.TransformersRuntime` makes instead."""
    from sgcli.engine import families

    config = None if folder is None else folder / "config.json"
    if config is None or not config.is_file():
        return  # transformers reports a missing config in its own words
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    why = families.unrunnable(data) if isinstance(data, dict) else None
    if why is not None:
        raise UserError(
            f"the model config {config} describes a model neither sgcli's forward nor transformers' can run: {why}",
            hint="correct those keys in config.json (compare with the model's original release)",
        )


def _native_refused(name: str, why: str) -> UserError:
    """--model-impl native for a model the native forward cannot run: exit 2, saying why."""
    return UserError(
        f"the native model implementation cannot run {name}: {why}",
        hint="use --model-impl transformers (or auto, which picks it for such models)",
    )


def native_folder(ref: ModelRef, progress: Progress | None = None) -> Path | None:
    """Where the native forward reads `ref`'s config and safetensors: its folder, a .gguf's cached
    conversion, a hub id's snapshot in the local hub cache (None until all its files are there)."""
    if ref.kind == "gguf":
        return convert_gguf(ref.path, progress)
    if ref.kind == "hub":
        return _hub_snapshot(ref)
    return ref.path


def _hub_snapshot(ref: ModelRef) -> Path | None:
    """The hub cache's snapshot folder of `ref` at its revision, where its config.json and every
    safetensors file it names are there (a snapshot folder is a model folder); else None."""
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(ref.location, revision=ref.revision, local_files_only=True))
    except (OSError, ValueError):  # not in the cache (LocalEntryNotFoundError), or not a valid id
        return None
    files = checkpoint.weight_files(folder)
    complete = (folder / "config.json").is_file() and files and all(f.is_file() for f in files)
    return folder if complete else None


def _native_misfit(ref: ModelRef, folder: Path | None, placement: dict) -> str | None:
    """Why the native forward does not run `ref`, read from `folder` (`native_folder`; None when it does)."""
    from sgcli.engine import gguf_recipe, llama

    if placement:
        return "--device-map places modules with accelerate, which needs transformers' model"
    if folder is None:
        return (
            "its files are not all in the local hub cache yet (transformers downloads them; "
            "the next run reads the snapshot folder)"
        )
    if ref.trust_remote_code or needs_remote_code(folder / "config.json"):
        return "the model brings its own code"
    if not checkpoint.weight_files(folder) and not (ref.kind == "gguf" and gguf_recipe.has_recipe(folder)):
        return "the folder has no safetensors weights"
    return llama.misfit(checkpoint.read_config(folder / "config.json"))


def needs_remote_code(config: Path) -> bool:
    """Whether a model's config names its own code (`auto_map`): transformers runs it, sgcli's forward cannot."""
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # from_pretrained says what is wrong with it
    return isinstance(data, dict) and "auto_map" in data
