"""Mistral tokenizers bundled in `mistral-common`, usable offline: `mistral:tekken`, `mistral:v3`, ...

Tekken (a tiktoken BPE) puts 1000 special tokens before its byte-level vocabulary.
Its decoded-text vocabulary collapses 1,028 ids (partial UTF-8 pieces all decode to
replacement characters), so sgcli builds the `Vocab` from exact bytes, as SGLang's
fix does: ordinary tokens from their byte pieces, special tokens from their text,
EOS as the stop token. The SentencePiece versions (v1, v2, v3, v7) are read from
their `.model` files by type (`<0xNN>` byte pieces, `▁` spaces), without the
sentencepiece package.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from pathlib import Path

from sgcli.errors import UserError
from sgcli.tokenizers.base import Tokenizer
from sgcli.tokenizers.files import read_tokenizer_file
from sgcli.tokenizers.spm import load_spm_tokenizer
from sgcli.tokenizers.vocab import RAW, Vocab

# ref name -> file name pattern inside mistral_common/data
_FILES = {
    "tekken": "tekken_240911.json",
    "tekken-240911": "tekken_240911.json",
    "tekken-240718": "tekken_240718.json",
    "v1": "tokenizer.model.v1",
    "v2": "*.model.v2",
    "v3": "*.model.v3",
    "v7": "*.model.v7",
}


def mistral_names() -> list[str]:
    return [f"mistral:{n}" for n in _FILES]


def _data_dir() -> Path:
    spec = importlib.util.find_spec("mistral_common")
    if spec is None or not spec.submodule_search_locations:
        from sgcli.extras import MissingExtra

        raise MissingExtra("mistral_common", "mistral", "reading mistral:* tokenizers")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def tokenizer_file(ref: str) -> Path:
    """The bundled file behind `mistral:NAME`."""
    name = ref.split(":", 1)[1].strip().lower()
    if name not in _FILES:
        raise UserError(f"unknown Mistral tokenizer '{ref}'", hint="choose one of: " + ", ".join(mistral_names()))
    data = _data_dir()
    found = sorted(data.glob(_FILES[name]))
    if not found:
        raise UserError(
            f"mistral-common has no file for {ref} in {data}",
            hint="a newer mistral-common may have renamed it; pip install -U mistral-common",
        )
    return found[-1]


def load_mistral(ref: str) -> Tokenizer:
    path = tokenizer_file(ref)
    if path.suffix == ".json":
        return load_tekken(path, ref)

    tok = load_spm_tokenizer(path, name=ref)
    tok.chat_encoder = chat_encoder(path, ref)
    return tok


def chat_encoder(path: Path, ref: str):
    """mistral-common's own chat encoding for the tokenizer file at `path`: (messages, tools) -> ids.
    The MistralTokenizer is built on first use; its validation errors are the user's (exit 2)."""
    built: list = []

    def encode(messages: list[dict], tools: list | None) -> list[int]:
        try:
            from mistral_common.exceptions import MistralCommonException
            from mistral_common.protocol.instruct.request import ChatCompletionRequest
        except ImportError as exc:
            from sgcli.extras import import_failure

            raise import_failure(exc, f"encoding chats for {ref}") from None
        if not built:
            built.append(_quietly(lambda: _mistral_tokenizer(path, ref)))
        try:
            request = ChatCompletionRequest(messages=messages, tools=tools)
            return list(_quietly(lambda: built[0].encode_chat_completion(request)).tokens)
        # pydantic's checks, and mistral-common's own (InvalidMessageStructureException, ...)
        except (ValueError, TypeError, KeyError, AssertionError, MistralCommonException) as exc:
            raise UserError(
                f"mistral-common cannot encode these messages for {ref}: {' '.join(str(exc).split())[:400]}",
                hint="roles are system, user, assistant, tool; user and assistant turns alternate",
            ) from None

    return encode


def _mistral_tokenizer(path: Path, ref: str):
    try:
        from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

        return MistralTokenizer.from_file(str(path))
    except ImportError as exc:  # SentencePiece versions need the sentencepiece package (in the same extra)
        from sgcli.extras import import_failure

        raise import_failure(exc, f"encoding chats for {ref}") from None


def _quietly(fn):
    """Run `fn` with mistral-common's logging and warnings held back (they are not the user's concern)."""
    quiet = logging.getLogger("mistral_common")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    finally:
        quiet.setLevel(level)


_SPECIAL_NAMES = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}


def load_tekken(path: Path, ref: str) -> Tokenizer:
    """A Tokenizer from a Tekken `tekken.json` file (bundled or from a model folder)."""
    try:
        from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    except ImportError as exc:
        from sgcli.extras import import_failure

        raise import_failure(exc, f"tokenizer {ref}") from None
    read_tokenizer_file(path)  # a regular file of a bounded size, before mistral-common reads it whole
    try:
        tk = _quietly(lambda: Tekkenizer.from_file(path))
    except (AssertionError, ValueError, KeyError, OSError) as exc:
        raise UserError(f"cannot build a vocabulary from {path} ({ref}): {exc}") from None

    special = frozenset(range(tk.num_special_tokens))
    tokens = [tk.id_to_byte_piece(i, SpecialTokenPolicy.KEEP) for i in range(tk.n_words)]
    empty = [i for i, t in enumerate(tokens) if not t and i not in special]
    if empty:
        raise UserError(f"{ref}: ids {empty[:5]} have no bytes; cannot build a vocabulary")

    def encode(text: str) -> list[int]:
        return tk.encode(text, bos=False, eos=False)

    vocab = Vocab(
        tokens=tokens,
        special_ids=special,
        stop_ids=(tk.eos_id,),
        vocab_type=RAW,
        source=str(path),
        eos_id=tk.eos_id,
        bos_id=tk.bos_id,
        add_prefix_space=False,
        encode=encode,
        notes=(f"Tekken {tk.version.value}: {tk.num_special_tokens} special ids first, then byte pieces",),
    )
    return Tokenizer(
        vocab=vocab,
        name=ref,
        encode_fn=encode,
        raw_chat_template=None,
        special_tokens=dict(_SPECIAL_NAMES),
        add_bos=True,
        chat_encoder=chat_encoder(path, ref),
    )
