"""Every tokenizer source becomes one `Tokenizer` holding one `Vocab`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from sgcli.errors import UserError
from sgcli.models import resolve_model
from sgcli.tokenizers.base import Tokenizer
from sgcli.tokenizers.vocab import IncrementalDetokenizer, Vocab

__all__ = ["Tokenizer", "Vocab", "IncrementalDetokenizer", "load_tokenizer"]

_loaded: dict[str, Tokenizer] = {}


def load_tokenizer(ref: str | None, *, progress: Callable[[str], None] | None = None) -> Tokenizer:
    """Load a tokenizer from a model reference, a tokenizer.json, a .gguf or a `mistral:` name."""
    key = ref or "default"
    if key not in _loaded:
        _loaded[key] = _load(ref, progress)
    return _loaded[key]


def _load(ref: str | None, progress) -> Tokenizer:
    from sgcli.tokenizers.gguf import cached_tokenizer_dir
    from sgcli.tokenizers.hf import load_tokenizer_json

    if ref and ref.startswith("mistral:"):
        from sgcli.tokenizers.mistral import load_mistral

        return load_mistral(ref)
    if ref and Path(ref).name == "tokenizer.json":
        p = Path(ref).expanduser()
        if not p.is_file():
            raise UserError(f"tokenizer file not found: {ref}")
        return load_tokenizer_json(p)
    model = resolve_model(ref)
    if model.kind == "gguf":
        folder = cached_tokenizer_dir(model.path, progress)
        return load_tokenizer_json(folder / "tokenizer.json", name=model.display)
    if model.kind == "dir":
        tj = model.path / "tokenizer.json"
        if not tj.is_file():
            raise UserError(f"{model.location} has no tokenizer.json",
                            hint="sgcli reads fast (tokenizer.json) tokenizers; convert it with transformers first")
        return load_tokenizer_json(tj, name=model.display)
    return load_tokenizer_json(_hub_file(model.location, "tokenizer.json"), name=model.display)


def _hub_file(repo: str, filename: str) -> Path:
    """A file of a hub repository, downloading it if the network allows."""
    try:
        from huggingface_hub import hf_hub_download

        path = Path(hf_hub_download(repo, filename))
        for extra in ("tokenizer_config.json", "chat_template.jinja"):
            try:
                hf_hub_download(repo, extra)
            except Exception:  # optional files
                pass
        return path
    except Exception as exc:
        raise UserError(f"cannot fetch {filename} of '{repo}' from the Hugging Face hub: {type(exc).__name__}",
                        hint="check the id, your network and HF_TOKEN, or pass a local directory") from None
