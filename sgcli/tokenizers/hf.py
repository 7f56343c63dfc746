"""Hugging Face `tokenizer.json` files, read with the `tokenizers` library (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

from sgcli.errors import UserError
from sgcli.tokenizers.base import Tokenizer
from sgcli.tokenizers.pieces import byte_fallback_piece, byte_level_piece
from sgcli.tokenizers.vocab import BYTE_FALLBACK, BYTE_LEVEL, RAW, Vocab


def _decoder_types(spec: dict | None) -> set[str]:
    if not spec:
        return set()
    if spec.get("type") == "Sequence":
        return {d.get("type") for d in spec.get("decoders", [])}
    return {spec.get("type")}


def detect_vocab_type(tokenizer_json: dict) -> str:
    types = _decoder_types(tokenizer_json.get("decoder"))
    if "ByteLevel" in types:
        return BYTE_LEVEL
    if "ByteFallback" in types or tokenizer_json.get("model", {}).get("byte_fallback"):
        return BYTE_FALLBACK
    if "Metaspace" in types or "Replace" in types:
        return BYTE_FALLBACK
    return RAW


def _add_prefix_space(tokenizer_json: dict) -> bool:
    pre = tokenizer_json.get("pre_tokenizer") or {}
    if pre.get("type") == "Metaspace" and pre.get("prepend_scheme") in ("always", "first"):
        return True
    norm = tokenizer_json.get("normalizer") or {}
    norms = norm.get("normalizers", [norm]) if norm.get("type") == "Sequence" else [norm]
    return any(n.get("type") == "Prepend" and n.get("prepend") == "\u2581" for n in norms)


def _token_str(tok_cfg: dict, key: str) -> str | None:
    v = tok_cfg.get(key)
    if isinstance(v, dict):
        v = v.get("content")
    return v if isinstance(v, str) else None


def load_tokenizer_json(path: Path, *, name: str | None = None, extra_stop_ids: tuple[int, ...] = ()) -> Tokenizer:
    """A Tokenizer from `tokenizer.json`, with `tokenizer_config.json` and `chat_template.jinja` beside it."""
    from tokenizers import Tokenizer as HFTokenizer

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        hf = HFTokenizer.from_file(str(path))
    except (OSError, ValueError, Exception) as exc:  # the Rust loader raises plain Exception
        raise UserError(f"cannot read tokenizer {path}: {exc}") from None
    folder = path.parent
    cfg_path = folder / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}

    vocab_type = detect_vocab_type(raw)
    size = hf.get_vocab_size(with_added_tokens=True)
    added = {t["id"]: t for t in raw.get("added_tokens", [])}
    special_ids = {i for i, t in added.items() if t.get("special")}
    tokens: list[bytes] = []
    for i in range(size):
        piece = hf.id_to_token(i)
        if piece is None:
            tokens.append(b"")
            special_ids.add(i)
        elif i in added:
            tokens.append(piece.encode("utf-8"))
        elif vocab_type == BYTE_LEVEL:
            b = byte_level_piece(piece)
            tokens.append(b if b is not None else piece.encode("utf-8"))
        elif vocab_type == BYTE_FALLBACK:
            tokens.append(byte_fallback_piece(piece))
        else:
            tokens.append(piece.encode("utf-8"))

    specials = {k: _token_str(cfg, k) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
    specials = {k: v for k, v in specials.items() if v}
    eos_id = hf.token_to_id(specials["eos_token"]) if "eos_token" in specials else None
    bos_id = hf.token_to_id(specials["bos_token"]) if "bos_token" in specials else None
    stop_ids = tuple(dict.fromkeys(([eos_id] if eos_id is not None else []) + list(extra_stop_ids)))

    template = cfg.get("chat_template")
    jinja = folder / "chat_template.jinja"
    if template is None and jinja.is_file():
        template = jinja.read_text(encoding="utf-8")
    templates_dir = folder / "additional_chat_templates"
    if templates_dir.is_dir():
        named = {p.stem: p.read_text(encoding="utf-8") for p in sorted(templates_dir.glob("*.jinja"))}
        if named:
            template = ({"default": template} if isinstance(template, str) else {}) | named

    def encode(text: str) -> list[int]:
        return hf.encode(text, add_special_tokens=False).ids

    vocab = Vocab(tokens=tokens, special_ids=frozenset(special_ids), stop_ids=stop_ids,
                  vocab_type=vocab_type, source=str(path), eos_id=eos_id, bos_id=bos_id,
                  add_prefix_space=_add_prefix_space(raw), encode=encode)
    return Tokenizer(vocab=vocab, name=name or str(path), encode_fn=encode, raw_chat_template=template,
                     special_tokens=specials, add_bos=bool(cfg.get("add_bos_token", False)))
