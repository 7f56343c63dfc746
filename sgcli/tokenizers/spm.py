"""SentencePiece `.model` files, read without the sentencepiece package.

A `.model` file is a small protobuf (`ModelProto`): a list of pieces (text, score,
type) plus trainer and normalizer settings. sgcli decodes the few fields it needs
by hand, so neither `sentencepiece` nor `protobuf` has to be installed, and builds
an equivalent encoder with the `tokenizers` library: BPE models become a BPE with
merges ranked by piece score (as SentencePiece merges the highest-scoring pair
first), unigram models a Unigram model. Pieces become bytes by type: `<0xNN>` byte
pieces are one raw byte, `▁` is a space, control pieces keep their text.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from pathlib import Path

from sgcli.errors import UserError
from sgcli.tokenizers.base import Tokenizer
from sgcli.tokenizers.files import read_tokenizer_file
from sgcli.tokenizers.vocab import BYTE_FALLBACK, RAW, Vocab, text_encoder

# SentencePiece.Type in sentencepiece_model.proto
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM, BPE = 1, 2
SPACE = "\u2581"


@dataclass(frozen=True)
class SpmModel:
    pieces: list[tuple[str, float, int]]  # (piece, score, type), index = token id
    model_type: int = UNIGRAM
    byte_fallback: bool = False
    add_dummy_prefix: bool = True
    precompiled_charsmap: bytes = b""
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _fields(data: bytes):
    """(field number, value) of a protobuf message; value is int or bytes."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, value


def _int32(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def looks_like_spm(path: Path) -> bool:
    """Whether `path` opens as a SentencePiece ModelProto: field 1 (a piece) whose first field is its
    UTF-8 text, followed by a score (field 2), a type (field 3) or the piece's end. Strict on purpose:
    a text file opening with newlines (0x0a) must not pass for one."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
        key, i = _varint(head, 0)
        size, i = _varint(head, i)
        key2, j = _varint(head, i)
        text_size, j = _varint(head, j)
        if key != 0x0A or key2 != 0x0A or not 0 < text_size < size or j + text_size > len(head):
            return False
        head[j : j + text_size].decode("utf-8")
        end = j + text_size
        return end == i + size or (end < len(head) and head[end] in (0x15, 0x18))
    except (OSError, IndexError, UnicodeDecodeError):
        return False


def read_spm(path: Path) -> SpmModel:
    """Parse a SentencePiece model file; a malformed file is the user's error."""
    data = read_tokenizer_file(Path(path))
    try:
        pieces: list[tuple[str, float, int]] = []
        trainer: dict[int, object] = {}
        normalizer: dict[int, object] = {}
        for number, value in _fields(data):
            if number == 1:
                fields = dict(_fields(value))
                score = struct.unpack("<f", fields[2])[0] if 2 in fields else 0.0
                pieces.append((fields[1].decode("utf-8"), score, int(fields.get(3, NORMAL))))
            elif number == 2:
                trainer = dict(_fields(value))
            elif number == 3:
                normalizer = dict(_fields(value))
    except (OSError, ValueError, IndexError, KeyError, struct.error, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read SentencePiece model {path}: {exc}") from None
    if not pieces:
        raise UserError(f"{path} is not a SentencePiece model (no pieces found)")
    return SpmModel(
        pieces=pieces,
        model_type=int(trainer.get(3, UNIGRAM)),
        byte_fallback=bool(trainer.get(35, 0)),
        add_dummy_prefix=bool(normalizer.get(3, 1)),
        precompiled_charsmap=bytes(normalizer.get(2, b"")),
        unk_id=_int32(int(trainer.get(40, 0))),
        bos_id=_int32(int(trainer.get(41, 1))),
        eos_id=_int32(int(trainer.get(42, 2))),
        pad_id=_int32(int(trainer.get(43, (1 << 64) - 1))),
    )


def piece_bytes(piece: str, kind: int) -> bytes:
    """The bytes a piece stands for, decided by its type rather than its spelling."""
    if kind == BYTE:
        return bytes([int(piece[3:5], 16)])
    if kind in (NORMAL, USER_DEFINED):
        return piece.replace(SPACE, " ").encode("utf-8")
    return piece.encode("utf-8")  # control / unknown / unused: special, shown as text


def special_ids(model: SpmModel) -> set[int]:
    return {i for i, (_, _, kind) in enumerate(model.pieces) if kind in (CONTROL, UNKNOWN, UNUSED)}


def _bpe_merges(model: SpmModel) -> list[tuple[str, str]]:
    """Merges that reproduce SentencePiece BPE: the pair forming the best-scoring piece first."""
    mergeable = {p: i for i, (p, _, kind) in enumerate(model.pieces) if kind in (NORMAL, USER_DEFINED)}
    ranked = []
    for piece, merged_id in mergeable.items():
        score = model.pieces[merged_id][1]
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in mergeable and right in mergeable:
                ranked.append((-score, merged_id, cut, left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def build_encoder(model: SpmModel, *, dummy_prefix: bool):
    """A `tokenizers.Tokenizer` that segments text as the SentencePiece model does.

    `dummy_prefix=False` gives the continuation encoding (text whose bytes are
    exactly the tokens' bytes, without the leading space SentencePiece adds).
    """
    from tokenizers import AddedToken, models, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    vocab = {piece: i for i, (piece, _, _) in enumerate(model.pieces)}
    unk = model.pieces[model.unk_id][0] if 0 <= model.unk_id < len(model.pieces) else None
    if model.model_type == BPE:
        core = models.BPE(
            vocab=vocab, merges=_bpe_merges(model), unk_token=unk, fuse_unk=True, byte_fallback=model.byte_fallback
        )
    elif model.model_type == UNIGRAM:
        core = models.Unigram(
            [(p, s) for p, s, _ in model.pieces], unk_id=max(model.unk_id, 0), byte_fallback=model.byte_fallback
        )
    else:
        raise UserError(f"SentencePiece model type {model.model_type} is not supported (only BPE and unigram)")
    tok = HFTokenizer(core)
    if model.precompiled_charsmap:
        tok.normalizer = normalizers.Precompiled(model.precompiled_charsmap)
    scheme = "first" if (dummy_prefix and model.add_dummy_prefix) else "never"
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme=scheme, split=False)
    user_defined = [p for p, _, kind in model.pieces if kind == USER_DEFINED]
    if user_defined:  # SentencePiece matches these whole, wherever they occur
        tok.add_tokens([AddedToken(p, normalized=False, special=False) for p in user_defined])
    return tok


def load_spm_tokenizer(path: Path, *, name: str, chat_template=None, special_tokens: dict | None = None) -> Tokenizer:
    """A Tokenizer from a SentencePiece `.model` file (Mistral's, Llama's, ...)."""
    model = read_spm(path)
    tokens = [piece_bytes(p, kind) for p, _, kind in model.pieces]
    special = special_ids(model)
    special |= {i for i, t in enumerate(tokens) if not t}
    n = len(tokens)
    eos = model.eos_id if 0 <= model.eos_id < n else None
    bos = model.bos_id if 0 <= model.bos_id < n else None
    prompt_encoder = build_encoder(model, dummy_prefix=True)
    continuation = build_encoder(model, dummy_prefix=False)

    def encode(text: str) -> list[int]:
        return prompt_encoder.encode(text, add_special_tokens=False).ids

    encode_continuation = text_encoder(continuation, frozenset(special), threading.Lock())  # its own object

    names = {k: model.pieces[i][0] for k, i in (("bos_token", bos), ("eos_token", eos)) if i is not None}
    vocab = Vocab(
        tokens=tokens,
        special_ids=frozenset(special),
        stop_ids=(eos,) if eos is not None else (),
        vocab_type=BYTE_FALLBACK if model.byte_fallback else RAW,
        source=str(path),
        eos_id=eos,
        bos_id=bos,
        add_prefix_space=model.add_dummy_prefix,
        encode=encode_continuation,
    )
    return Tokenizer(
        vocab=vocab,
        name=name,
        encode_fn=encode,
        raw_chat_template=chat_template,
        special_tokens=special_tokens or names,
        add_bos=bos is not None,
    )
