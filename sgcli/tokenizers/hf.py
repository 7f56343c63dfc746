"""Hugging Face `tokenizer.json` files, read with the `tokenizers` library (no torch)."""

from __future__ import annotations

import copy
import json
import os
import threading
from pathlib import Path
from typing import Any

from sgcli.errors import Location, UserError
from sgcli.tokenizers.base import Tokenizer
from sgcli.tokenizers.files import read_tokenizer_file
from sgcli.tokenizers.pieces import byte_fallback_piece, byte_level_piece
from sgcli.tokenizers.vocab import BYTE_FALLBACK, BYTE_LEVEL, RAW, Vocab, text_encoder

# Names an end-of-sequence token goes by, for tokenizer.json files found without a config.
_EOS_NAMES = ("</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<eos>", "<|end|>")


def _decoder_types(spec: dict | None) -> set[str]:
    if not spec:
        return set()
    if spec.get("type") == "Sequence":
        return {d.get("type") for d in spec.get("decoders", [])}
    return {spec.get("type")}


def detect_vocab_type(tokenizer_json: dict) -> str:
    """Byte-level, byte-fallback or raw, from the decoder (then the vocabulary) rather than the model name."""
    types = _decoder_types(tokenizer_json.get("decoder"))
    if "ByteLevel" in types:
        return BYTE_LEVEL
    if "ByteFallback" in types or tokenizer_json.get("model", {}).get("byte_fallback"):
        return BYTE_FALLBACK
    if "Metaspace" in types or "Replace" in types:
        return BYTE_FALLBACK
    vocab = tokenizer_json.get("model", {}).get("vocab")
    if isinstance(vocab, dict) and "<0x0A>" in vocab:
        return BYTE_FALLBACK
    if isinstance(vocab, dict) and "\u010a" in vocab and "\u0120" in vocab:  # 'Ċ' and 'Ġ': GPT-2's \n and space
        return BYTE_LEVEL
    return RAW


def _normalizers(tokenizer_json: dict) -> list[dict]:
    norm = tokenizer_json.get("normalizer") or {}
    return norm.get("normalizers", []) if norm.get("type") == "Sequence" else [norm]


def _add_prefix_space(tokenizer_json: dict) -> bool:
    pre = tokenizer_json.get("pre_tokenizer") or {}
    pres = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    if any(
        p.get("type") == "Metaspace"
        and p.get("prepend_scheme", "always") in ("always", "first")
        and p.get("add_prefix_space", True)
        for p in pres
    ):
        return True
    return any(n.get("type") == "Prepend" and n.get("prepend") == "\u2581" for n in _normalizers(tokenizer_json))


def _without_prefix_space(tokenizer_json: dict) -> dict:
    """The same tokenizer minus SentencePiece's dummy prefix: the continuation encoding."""
    raw = copy.deepcopy(tokenizer_json)
    pre = raw.get("pre_tokenizer") or {}
    for p in pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]:
        if p.get("type") == "Metaspace":
            p["prepend_scheme"] = "never"
            p.pop("add_prefix_space", None)
    norm = raw.get("normalizer") or {}
    if norm.get("type") == "Prepend":
        raw["normalizer"] = None
    elif norm.get("type") == "Sequence":
        norm["normalizers"] = [n for n in norm["normalizers"] if n.get("type") != "Prepend"]
    return raw


def _token_str(tok_cfg: dict, key: str) -> str | None:
    v = tok_cfg.get(key)
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) else None


_OBJECT_HINTS = {
    "tokenizer_config.json": 'e.g. {"eos_token": "</s>", "chat_template": "..."}',
    "generation_config.json": 'e.g. {"eos_token_id": 2}',
}


def _read_text(path: Path) -> str:
    """A file beside the tokenizer, as Python's text mode reads it (bounded by read_tokenizer_file)."""
    data = read_tokenizer_file(path)
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def read_json(path: Path) -> dict:
    if not os.path.lexists(path):  # a broken link is there, and named
        return {}
    try:
        data = json.loads(_read_text(path))
    except ValueError as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} must hold a JSON object, not {type(data).__name__}", hint=_OBJECT_HINTS.get(path.name))
    return data


def folder_chat_template(folder: Path, cfg: dict) -> Any:
    """The chat template(s) of a tokenizer folder, as transformers finds them.

    `chat_template.jinja` and `additional_chat_templates/*.jinja` take priority over
    `chat_template` in tokenizer_config.json; several become an object of named templates.
    """
    files = template_files(folder)
    if not any(f.suffix == ".jinja" for f in files.values()):
        return cfg.get("chat_template")
    named = {name: _template_text(path) for name, path in files.items()}
    _say_overridden(folder, cfg.get("chat_template"), named)
    if list(named) == ["default"]:
        return named["default"]
    return named


def _say_overridden(folder: Path, configured: Any, named: dict[str, str]) -> None:
    """Say where tokenizer_config.json holds a template the .jinja files take the place of (as
    transformers reads the folder): an edit made there alone would change nothing, without a word."""
    if isinstance(configured, str):
        configured = {"default": configured}
    if not isinstance(configured, list | dict):
        return
    if isinstance(configured, list):  # [{"name": ..., "template": ...}], transformers' saved form
        configured = {t.get("name"): t.get("template") for t in configured if isinstance(t, dict)}
    differ = sorted(str(n) for n, text in configured.items() if text != named.get(n))
    if differ:
        from sgcli.cache.paths import notify

        which = ", ".join(repr(n) for n in differ)
        notify(
            f"{folder / 'tokenizer_config.json'}: its chat_template ({which}) is not used: the .jinja files "
            "beside it take its place, as transformers reads the folder, and hold other text"
        )


def template_files(folder: Path) -> dict[str, Path]:
    """Template name -> the file it is read from (`folder_chat_template`'s choice): the .jinja files,
    else tokenizer_config.json (for any name), for errors that name the file to fix."""
    files: dict[str, Path] = {}
    if os.path.lexists(folder / "chat_template.jinja"):  # whatever it is: one that cannot be read is named
        files["default"] = folder / "chat_template.jinja"
    extra = folder / "additional_chat_templates"
    if extra.is_dir():
        files |= {p.stem: p for p in sorted(extra.glob("*.jinja"))}
    return files or {"*": folder / "tokenizer_config.json"}


def _template_text(path: Path) -> str:
    try:
        return _read_text(path)
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path} is not UTF-8 text (byte {exc.start}: {exc.object[exc.start : exc.start + 1]!r})",
            hint="save the chat template as UTF-8",
        ) from None


def _adds_bos(tokenizer_json: dict, bos: str | None, cfg: dict) -> bool:
    """Whether encoding a raw prompt starts with BOS (the post-processor decides in fast tokenizers)."""
    post = tokenizer_json.get("post_processor") or {}
    posts = post.get("processors", []) if post.get("type") == "Sequence" else [post]
    for p in posts:
        if p.get("type") == "TemplateProcessing" and p.get("single"):
            first = p["single"][0]
            return bool(bos) and isinstance(first, dict) and first.get("SpecialToken", {}).get("id") == bos
    return bool(cfg.get("add_bos_token", False))


def _configured_eos_ids(path: Path, size: int) -> list[int] | None:
    """`eos_token_id` of generation_config.json or config.json (an id or a list of ids); None where the file
    or key is absent. An id that is not a token (negative, beyond the vocabulary, not an integer) is exit 2
    naming the file and key: dropped, it left a model whose eos was unknown without a stop token."""
    if not os.path.lexists(path):
        return None
    eos = read_json(path).get("eos_token_id")
    if eos is None:
        return None
    ids = eos if isinstance(eos, list) else [eos]
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < size:
            raise UserError(
                f"`eos_token_id` is {json.dumps(eos)[:80]}: {json.dumps(i)[:40]} is not a token id of this "
                f"tokenizer (ids 0 to {size - 1:,})",
                location=Location(str(path)),
                hint="write the id (or list of ids) of the model's end-of-sequence token(s), or remove the key",
            )
    return ids


def _say(notes: list[str], note: str) -> None:
    """A note on the vocabulary (`tokenizer inspect`) that every command prints on stderr too."""
    from sgcli.cache.paths import notify

    notes.append(note)
    notify(note)


def _check_model_config(path: Path, size: int, notes: list[str]) -> None:
    """config.json's `eos_token_id` where the tokenizer's own eos is known: sgcli does not stop on it, but a
    nonsense one is said (it was accepted without a word) rather than refused."""
    try:
        _configured_eos_ids(path, size)
    except UserError as exc:
        _say(notes, f"{path}: {exc.message}; ignored: the tokenizer's eos_token is used")


def _unknown_eos(eos_text: str, path: Path, folder: Path, size: int, configured: list[int] | None):
    """(eos id, where it came from) for an `eos_token` the vocabulary lacks: the first id of
    generation_config.json, else config.json; with neither, exit 2 naming the file and key (unknown,
    it reached llguidance as "Invalid buffer size", exit 3, and xgrammar as wrong verdicts)."""
    source = folder / "generation_config.json"
    if not configured:
        source = folder / "config.json"
        configured = _configured_eos_ids(source, size)
    if configured:
        return configured[0], source
    raise UserError(
        f"`eos_token` {json.dumps(eos_text)[:80]} is not a token of {path}",
        location=Location(str(folder / "tokenizer_config.json")),
        hint="write the text of the model's end-of-sequence token there (one of tokenizer.json's tokens), or "
        'give its id in generation_config.json (e.g. {"eos_token_id": 2})',
    )


def load_tokenizer_json(path: Path, *, name: str | None = None, extra_stop_ids: tuple[int, ...] = ()) -> Tokenizer:
    """A Tokenizer from `tokenizer.json`, with `tokenizer_config.json` and chat templates beside it."""
    from tokenizers import Tokenizer as HFTokenizer

    data = read_tokenizer_file(path)
    try:
        text = data.decode("utf-8")
        raw = json.loads(text)
        hf = HFTokenizer.from_str(text)
    except (OSError, ValueError, Exception) as exc:  # the Rust loader raises plain Exception
        raise UserError(f"cannot read tokenizer {path}: {exc}") from None
    folder = path.parent
    cfg = read_json(folder / "tokenizer_config.json")
    notes: list[str] = []

    vocab_type = detect_vocab_type(raw)
    size = hf.get_vocab_size(with_added_tokens=True)
    added = {t["id"]: t for t in raw.get("added_tokens", [])}
    special_ids = {i for i, t in added.items() if t.get("special")}
    tokens = _token_bytes(hf, size, added, vocab_type)
    empty = {i for i, t in enumerate(tokens) if not t and i not in special_ids}
    if empty:  # an id that writes nothing can only stall a grammar: every backend must see it as special
        special_ids |= empty
        notes.append(f"{len(empty)} id(s) without any bytes are treated as special")

    specials = config_special_tokens(cfg, folder / "tokenizer_config.json")
    eos_text = specials.get("eos_token") or _guessed_eos(hf, notes)
    eos_id = hf.token_to_id(eos_text) if eos_text else None
    configured = _configured_eos_ids(folder / "generation_config.json", size)
    if eos_id is None and eos_text:
        eos_id, source = _unknown_eos(eos_text, path, folder, size, configured)
        note = (
            f"eos_token {eos_text!r} of tokenizer_config.json is not a token of {path.name}: EOS is id {eos_id} "
            f"({hf.id_to_token(eos_id)!r}), the eos_token_id of {source}"
        )
        _say(notes, note)
    elif eos_id is not None:
        _check_model_config(folder / "config.json", size, notes)
    bos_id = hf.token_to_id(specials["bos_token"]) if "bos_token" in specials else None
    stops = ([eos_id] if eos_id is not None else []) + (configured or []) + list(extra_stop_ids)
    stop_ids = tuple(i for i in dict.fromkeys(stops) if 0 <= i < size)

    add_prefix = _add_prefix_space(raw)
    continuation = HFTokenizer.from_str(json.dumps(_without_prefix_space(raw))) if add_prefix else hf

    lock = threading.Lock()  # the flag text_encoder sets is the object's, and `continuation` may be `hf`

    def encode(text: str) -> list[int]:
        with lock:
            return hf.encode(text, add_special_tokens=False).ids

    encode_continuation = text_encoder(continuation, frozenset(special_ids), lock)

    vocab = Vocab(
        tokens=tokens,
        special_ids=frozenset(special_ids),
        stop_ids=stop_ids,
        vocab_type=vocab_type,
        source=str(path),
        eos_id=eos_id,
        bos_id=bos_id,
        add_prefix_space=add_prefix,
        encode=encode_continuation,
        notes=tuple(notes),
    )
    return Tokenizer(
        vocab=vocab,
        name=name or str(path),
        encode_fn=encode,
        raw_chat_template=folder_chat_template(folder, cfg),
        template_files=template_files(folder),
        special_tokens=specials,
        add_bos=_adds_bos(raw, specials.get("bos_token"), cfg),
    )


def _token_bytes(hf, size: int, added: dict, vocab_type: str) -> list[bytes]:
    """The exact bytes of every id: added tokens as their text, others decoded by the vocabulary's type."""
    tokens: list[bytes] = []
    for i in range(size):
        piece = hf.id_to_token(i)
        if piece is None:
            tokens.append(b"")
        elif i in added:
            tokens.append(piece.encode("utf-8"))
        elif vocab_type == BYTE_LEVEL:
            b = byte_level_piece(piece)
            tokens.append(b if b is not None else piece.encode("utf-8"))
        elif vocab_type == BYTE_FALLBACK:
            tokens.append(byte_fallback_piece(piece))
        else:
            tokens.append(piece.encode("utf-8"))
    return tokens


# transformers' SPECIAL_TOKENS_ATTRIBUTES: where the file gives one, it must be a token's text.
_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def config_special_tokens(cfg: dict, path: Path) -> dict:
    """The special-token variables a chat template sees, as transformers' `apply_chat_template` passes them
    (its special_tokens_map): every `*_token` of tokenizer_config.json (bos, eos, unk, sep, pad, cls, mask)
    and `additional_special_tokens`. Only what the file says: a template that prints `eos_token` where the
    file names none prints nothing, as in transformers. A special token that is not text (`"bos_token": 5`)
    is refused naming `path` and the key: dropped, it read as "the model has no BOS token"."""
    for key in _SPECIAL_NAMES:
        if cfg.get(key) is not None and _token_str(cfg, key) is None:
            raise _not_text(path, key, cfg[key])
    specials: dict = {k: _token_str(cfg, k) for k in cfg if k.endswith("_token") and isinstance(k, str)}
    specials = {k: v for k, v in specials.items() if v}
    extra = cfg.get("additional_special_tokens")
    if extra is not None and not isinstance(extra, list):
        raise _not_text(path, "additional_special_tokens", extra, "a list of tokens")
    if extra is not None:
        texts = [t.get("content") if isinstance(t, dict) else t for t in extra]
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise _not_text(path, f"additional_special_tokens[{i}]", extra[i])
        specials["additional_special_tokens"] = texts
    return specials


def _not_text(path: Path, key: str, value, wanted: str = 'a string (or {"content": "..."})') -> UserError:
    example = '"additional_special_tokens": ["<tool>"]' if key.startswith("additional") else f'"{key}": "<s>"'
    return UserError(
        f"`{key}` is {json.dumps(value)[:80]}, not {wanted}",
        location=Location(str(path)),
        hint=f"write the token's text, e.g. {example}",
    )


def _guessed_eos(hf, notes: list[str]) -> str | None:
    """Where tokenizer_config.json names no eos_token: one guessed by its name, for stopping only (with a note).
    A token marked special comes first: Gemma 3's vocabulary holds `</s>` as ordinary text (id 212) and
    `<eos>` as its special end, and guessing `</s>` ended a match at text that spelled it."""
    try:
        special = {t.content for t in hf.get_added_tokens_decoder().values() if t.special}
    except AttributeError:  # a tokenizers release without the added-token table
        special = set()
    present = [n for n in _EOS_NAMES if hf.token_to_id(n) is not None]
    guess = next((n for n in present if n in special), present[0] if present else None)
    if guess:
        kind = "" if guess in special else " (an ordinary token there: no name in the list is marked special)"
        notes.append(f"no tokenizer_config.json eos_token: EOS guessed from the token name {guess!r}{kind}")
    else:
        notes.append("no EOS token known: generation stops only at --max-tokens or a grammar's end")
    return guess
