"""What `sgcli tokenizer inspect` and `sgcli tokenizer diff` report, as plain data.

Pure functions over a `Tokenizer`: the CLI renders them as tables or JSON. The
questions they answer are the ones that break structured output: does every id
have distinct bytes, which ids are special or stop generation, can every byte be
written, and how is a given text split into tokens.
"""

from __future__ import annotations

from typing import Any

from sgcli.tokenizers.base import Tokenizer
from sgcli.tokenizers.templates import template_names
from sgcli.tokenizers.vocab import BYTE_FALLBACK, Vocab

EXAMPLES = 5  # collision groups / differences listed in full


def show_bytes(piece: bytes) -> str:
    """A piece as readable text: UTF-8 where valid, escapes for control characters and stray bytes."""
    text = piece.decode("utf-8", errors="backslashreplace")
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _piece(vocab: Vocab, token_id: int) -> dict[str, Any]:
    piece = vocab.tokens[token_id]
    return {"id": token_id, "text": show_bytes(piece), "hex": piece.hex(), "special": token_id in vocab.special_ids}


def _groups(groups: dict, key_name: str, show) -> dict[str, Any]:
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    return {
        "ids": sum(len(ids) for ids in groups.values()) - len(groups),  # ids lost if keyed by this
        "groups": len(groups),
        "examples": [{key_name: show(k), "ids": ids} for k, ids in ordered[:EXAMPLES]],
    }


def byte_collision_report(vocab: Vocab) -> dict[str, Any]:
    """Ordinary ids sharing identical bytes in sgcli's vocabulary."""
    report = _groups(vocab.byte_collisions(), "bytes", show_bytes)
    if vocab.vocab_type == BYTE_FALLBACK and report["groups"]:
        report["note"] = (
            "byte-fallback vocabularies spell some bytes twice (<0xNN> pieces and ordinary "
            "pieces): expected, and harmless since both ids write the same bytes"
        )
    return report


def text_collision_report(vocab: Vocab) -> dict[str, Any]:
    """Ids a vocabulary keyed by decoded text (`get_vocab()`-style) would lose."""
    return _groups(vocab.text_collisions(), "text", str)


def _invalid_in_utf8(byte: int) -> bool:
    return byte in (0xC0, 0xC1) or byte >= 0xF5


def reachable_report(vocab: Vocab) -> dict[str, Any]:
    """Which bytes some single-byte token writes (so any text made of them can be generated)."""
    have = vocab.reachable_bytes()
    missing = sorted(set(range(256)) - have)
    report: dict[str, Any] = {"count": len(have), "all": not missing, "missing": [f"0x{b:02X}" for b in missing]}
    needed = [b for b in missing if not _invalid_in_utf8(b)]
    if missing and not needed:
        report["note"] = "every missing byte is invalid in UTF-8, so no text needs it"
    elif needed:
        inside = {b for i in vocab.ordinary_ids() for b in vocab.tokens[i]}
        never = [b for b in needed if b not in inside]
        report["unwritable"] = [f"0x{b:02X}" for b in never]
        if never:
            report["note"] = (
                f"{len(never)} byte(s) valid in UTF-8 appear in no token at all "
                f"({' '.join(report['unwritable'][:8])}): text containing them cannot be generated"
            )
    return report


def tokenize_report(tok: Tokenizer, text: str) -> dict[str, Any]:
    """How `text` is written as tokens (continuation encoding: exactly its bytes, no prefix space)."""
    vocab = tok.vocab
    if vocab.encode is None:
        return {"text": text, "error": "this vocabulary has no encoder"}
    ids = vocab.encode(text)
    joined = b"".join(vocab.tokens[i] for i in ids)
    return {
        "text": text,
        "ids": ids,
        "pieces": [_piece(vocab, i) for i in ids],
        "round_trip": joined == text.encode("utf-8"),
    }


def inspect_tokenizer(tok: Tokenizer, text: str | None = None) -> dict[str, Any]:
    vocab = tok.vocab
    specials = sorted(vocab.special_ids)
    report: dict[str, Any] = {
        "tokenizer": tok.name,
        "source": vocab.source,
        "type": vocab.vocab_type,
        "size": len(vocab),
        "ordinary": len(vocab) - len(specials),
        "special": {"count": len(specials), "tokens": [_piece(vocab, i) for i in specials]},
        "eos_id": vocab.eos_id,
        "bos_id": vocab.bos_id,
        "stop_ids": list(vocab.stop_ids),
        "stop_tokens": [show_bytes(vocab.tokens[i]) for i in vocab.stop_ids],
        "add_prefix_space": vocab.add_prefix_space,
        "add_bos": tok.add_bos,
        "byte_collisions": byte_collision_report(vocab),
        "text_collisions": text_collision_report(vocab),
        "reachable_bytes": reachable_report(vocab),
        "chat_template": _template_summary(tok),
        "notes": list(vocab.notes),
    }
    if text is not None:
        report["tokenization"] = tokenize_report(tok, text)
    return report


def _template_summary(tok: Tokenizer) -> dict[str, Any] | None:
    names = template_names(tok.raw_chat_template)
    return {"names": names} if names else None


def diff_tokenizers(a: Tokenizer, b: Tokenizer, text: str | None = None) -> dict[str, Any]:
    """Where two sources of (supposedly) the same tokenizer disagree; `same` is True when nowhere."""
    va, vb = a.vocab, b.vocab
    common = min(len(va), len(vb))
    differing = [i for i in range(common) if va.tokens[i] != vb.tokens[i]]
    special_only_a = sorted(va.special_ids - vb.special_ids)
    special_only_b = sorted(vb.special_ids - va.special_ids)
    fields = {}
    for name, x, y in (
        ("type", va.vocab_type, vb.vocab_type),
        ("eos_id", va.eos_id, vb.eos_id),
        ("bos_id", va.bos_id, vb.bos_id),
        ("stop_ids", list(va.stop_ids), list(vb.stop_ids)),
        ("add_prefix_space", va.add_prefix_space, vb.add_prefix_space),
        ("add_bos", a.add_bos, b.add_bos),
    ):
        if x != y:
            fields[name] = {"a": x, "b": y}
    report: dict[str, Any] = {
        "a": {"tokenizer": a.name, "size": len(va)},
        "b": {"tokenizer": b.name, "size": len(vb)},
        "fields": fields,
        "size_difference": len(vb) - len(va),
        "differing_bytes": {
            "count": len(differing),
            "examples": [
                {"id": i, "a": show_bytes(va.tokens[i]), "b": show_bytes(vb.tokens[i])} for i in differing[:EXAMPLES]
            ],
        },
        "special_only_in_a": special_only_a,
        "special_only_in_b": special_only_b,
        "only_in_a": [_piece(va, i) for i in range(common, len(va))][:EXAMPLES],
        "only_in_b": [_piece(vb, i) for i in range(common, len(vb))][:EXAMPLES],
    }
    if text is not None:
        ta, tb = tokenize_report(a, text), tokenize_report(b, text)
        report["tokenization"] = {
            "text": text,
            "a": ta.get("ids"),
            "b": tb.get("ids"),
            "same": ta.get("ids") == tb.get("ids"),
        }
    report["same"] = (
        not fields
        and not differing
        and len(va) == len(vb)
        and not special_only_a
        and not special_only_b
        and report.get("tokenization", {}).get("same", True)
    )
    return report
