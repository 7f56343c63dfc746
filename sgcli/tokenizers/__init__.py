"""Every tokenizer source becomes one `Tokenizer` holding one `Vocab`."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sgcli.errors import UserError
from sgcli.tokenizers.hf import load_tokenizer_json
from sgcli.tokenizers.vocab import IncrementalDetokenizer, Vocab

if TYPE_CHECKING:
    from sgcli.tokenizers.base import Tokenizer

__all__ = ["Tokenizer", "Vocab", "IncrementalDetokenizer", "load_tokenizer"]

_loaded: dict[str, Tokenizer] = {}


def __getattr__(name: str):
    """`Tokenizer` on first use: importing the package for `Vocab` (as `sgcli lint` does) loads no templates."""
    if name == "Tokenizer":
        from sgcli.tokenizers.base import Tokenizer

        return Tokenizer
    raise AttributeError(name)


def load_tokenizer(
    ref: str | None,
    *,
    progress: Callable[[str], None] | None = None,
    revision: str | None = None,
    gguf_file: str | None = None,
    flag: str | None = "--tokenizer",
) -> Tokenizer:
    """A tokenizer from: None/"default" (the embedded model), a Hugging Face id or folder, a
    tokenizer.json / tokenizer_config.json / tekken.json / SentencePiece .model file, a .gguf,
    or `mistral:NAME`. `revision` and `gguf_file` pick a hub model's files as `--model` does
    (no custom code ever runs here: tokenizer.json is data, so --trust-remote-code plays no part).
    Loaded once per process; a source that cannot be read is a UserError, and one that needs a
    package the light core lacks is a `MissingExtra` naming the extra. `flag` is the option the
    command takes `ref` from (`--model`; None for an argument), for hints."""
    if ref is not None and not ref.strip():  # `--tokenizer ''` (an unset shell variable) read as the default
        raise UserError(
            f"{flag or 'the tokenizer'} is empty",
            hint="give a tokenizer.json, a folder, a .gguf, mistral:NAME, or default for the embedded model's",
        )
    key = f"{ref or 'default'}@{revision or ''}:{gguf_file or ''}"
    if key not in _loaded:
        _loaded[key] = _with_tokens(_load(ref, progress, revision, gguf_file, flag), ref)
    return _loaded[key]


def _with_tokens(tokenizer: Tokenizer, ref: str | None) -> Tokenizer:
    """`tokenizer`, if it has an ordinary token: a grammar library given none fails inside (llguidance:
    "Invalid buffer size"), and no text can be spelled with special tokens alone."""
    vocab = tokenizer.vocab
    if not any(i not in vocab.special_ids for i in range(len(vocab.tokens))):
        what = "an empty vocabulary" if not vocab.tokens else "only special tokens"
        raise UserError(
            f"tokenizer {ref or 'default'} has {what}",
            hint="pass the tokenizer.json (or folder, .gguf, mistral:NAME) of a trained model",
        )
    return tokenizer


def _load(
    ref: str | None,
    progress,
    revision: str | None = None,
    gguf_file: str | None = None,
    flag: str | None = "--tokenizer",
) -> Tokenizer:
    if ref and ref.startswith("mistral:"):
        from sgcli.tokenizers.mistral import load_mistral

        return load_mistral(ref)
    path = Path(ref).expanduser() if ref and ref != "default" and not (revision or gguf_file) else None
    try:
        if path is not None and path.is_dir():
            return _load_folder(path, name=path.name or str(path))
        if path is not None and path.is_file() and path.suffix != ".gguf":
            return _load_file(path)
        from sgcli.models.refs import resolve_model

        model = resolve_model(ref, revision=revision, gguf_file=gguf_file, flag=flag)
        if model.kind == "gguf":
            from sgcli.tokenizers.gguf import load_converted

            return load_converted(model.path, lambda folder: _load_folder(folder, name=model.display), progress)
        from sgcli.models.hub import hub_file

        extras = ("tokenizer_config.json", "chat_template.jinja", "generation_config.json")
        path = hub_file(model.location, "tokenizer.json", revision=model.revision, optional=extras)
        return load_tokenizer_json(path, name=model.display)
    except UserError:
        raise
    except ImportError as exc:  # a hub id needs huggingface_hub, a SentencePiece .model sentencepiece, ...
        from sgcli.extras import import_failure

        raise import_failure(exc, f"tokenizer '{ref or 'default'}'") from None
    except (OSError, ValueError, RuntimeError, KeyError) as exc:  # a library refused the files
        raise UserError(
            f"cannot build a vocabulary for tokenizer '{ref or 'default'}': {type(exc).__name__}: {exc}",
            hint="pass a tokenizer.json, a folder holding one, a .gguf or mistral:NAME",
        ) from None


# A SentencePiece model as mistral-common names one: tokenizer.model, tokenizer.model.v3, ....model.v7m1
_SPM_NAME = re.compile(r"\.model(\.v\d+(m\d+)?)?$")
_FILE_KINDS = "tokenizer.json, tekken.json, a SentencePiece .model, a .gguf, or a folder holding one"


def _load_file(path: Path) -> Tokenizer:
    """tokenizer.json, tokenizer_config.json (its folder), tekken.json, or a SentencePiece .model,
    told apart by content, not name: a Tekken or HF file may be saved under any name, and
    mistral-common's SentencePiece files end in .model.v3, .model.v7m1, ..."""
    from sgcli.tokenizers.spm import load_spm_tokenizer, looks_like_spm

    if path.name == "tokenizer_config.json":
        return _load_folder(path.parent, name=str(path.parent))
    if _SPM_NAME.search(path.name) or (path.suffix != ".json" and looks_like_spm(path)):
        return load_spm_tokenizer(path, name=str(path))
    if path.suffix == ".json":
        return _load_json_file(path)
    raise UserError(f"{path} is not a tokenizer file sgcli reads", hint=_FILE_KINDS)


def _load_json_file(path: Path) -> Tokenizer:
    """A Tekken file (top-level `config` and `vocab`, as mistral-common's Tekkenizer reads it) or a
    Hugging Face tokenizer.json (a `model`); any other JSON is refused naming both."""
    from sgcli.tokenizers.hf import read_json

    data = read_json(path)
    if "config" in data and "vocab" in data:
        from sgcli.tokenizers.mistral import load_tekken

        return load_tekken(path, str(path))
    if "model" in data or not path.is_file():
        return load_tokenizer_json(path)
    keys = ", ".join(list(data)[:5]) or "none"
    raise UserError(
        f"{path} is JSON but not a tokenizer: its top-level keys are {keys}",
        hint="a Hugging Face tokenizer.json has a 'model' key; a Tekken file has 'config' and 'vocab'",
    )


def _load_folder(folder: Path, *, name: str) -> Tokenizer:
    """A model or tokenizer folder: tokenizer.json first, else tokenizer.model, else tekken.json."""
    if (folder / "tokenizer.json").is_file():
        return load_tokenizer_json(folder / "tokenizer.json", name=name)
    if (folder / "tokenizer.model").is_file():
        from sgcli.tokenizers.hf import config_special_tokens, folder_chat_template, read_json, template_files
        from sgcli.tokenizers.spm import load_spm_tokenizer

        cfg = read_json(folder / "tokenizer_config.json")
        tok = load_spm_tokenizer(folder / "tokenizer.model", name=name, chat_template=folder_chat_template(folder, cfg))
        tok.template_files = template_files(folder)
        tok.special_tokens = {
            **tok.special_tokens,
            **config_special_tokens(cfg, folder / "tokenizer_config.json"),
        }  # as transformers' template sees
        return tok
    if (folder / "tekken.json").is_file():
        from sgcli.tokenizers.mistral import load_tekken

        return load_tekken(folder / "tekken.json", name)
    raise UserError(
        f"{folder} holds no tokenizer (tokenizer.json, tokenizer.model or tekken.json)",
        hint="pass the folder a model was saved to, or a tokenizer file",
    )
