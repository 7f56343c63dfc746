"""A GGUF file's tokenizer as a tokenizer folder, built with the `tokenizers` library alone.

The light core (sgcli without extras: no torch, no transformers) reads the embedded model's
vocabulary, and any GGUF whose tokenizer is byte-level BPE (`tokenizer.ggml.model = gpt2`) or
SentencePiece BPE (`llama`), through this. Where transformers is installed its own converter
(`AutoTokenizer.from_pretrained(gguf_file=...)`) runs instead (`sgcli.tokenizers.gguf`), and the
tests hold this one to it: the same `Vocab`, token for token, and the same encodings.

It makes the calls transformers' GGUF tokenizer mapping (transformers 5,
`integrations/gguf/gguf_tokenizer_mapping.py`) makes, in the same order, since the ids of tokens a
step adds depend on it:

1. the model: BPE over the file's tokens and merges (merges rebuilt from the scores where the file
   has none), with GPT2Tokenizer's or LlamaTokenizer's pre-tokenizer and decoder;
2. that class's default special tokens (`<|endoftext|>`; `<unk>`, `<s>`, `</s>`), added if missing;
3. CONTROL tokens as special added tokens (in a byte-level vocabulary only those spelled in the
   byte alphabet), USER_DEFINED ones as plain added tokens;
4. the split regex of the file's `tokenizer.ggml.pre`, where one is known;
5. the file's own bos/eos/unk/pad tokens as special, and BOS/EOS in the post-processor as the
   file's `add_bos_token` / `add_eos_token` say (SentencePiece files add BOS unless they say not).

Tokenizers transformers rebuilds its own way (Gemma's and Phi-3's SentencePiece, T5's Unigram,
Gemma 4) are not mirrored: `Unsupported`, and the caller asks for transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

from sgcli.tokenizers.pieces import byte_level_decoder

_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp's token types
_SPECIALS = ("bos_token", "eos_token", "unk_token", "pad_token")  # transformers' order (no sep/cls/mask in a GGUF)
_SPECIAL_IDS = {
    "bos_token": "tokenizer.ggml.bos_token_id",
    "eos_token": "tokenizer.ggml.eos_token_id",
    "unk_token": "tokenizer.ggml.unknown_token_id",
    "pad_token": "tokenizer.ggml.padding_token_id",
}
# Architectures whose SentencePiece vocabulary transformers rebuilds with its own fixes.
_REBUILT_ARCHITECTURES = ("gemma", "gemma2", "gemma3", "phi3")

_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN35_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_TEKKEN_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GPT4O_SPLIT = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# `tokenizer.ggml.pre` -> the split its merges were learned with; any other value keeps GPT-2's.
_SPLITS = {
    **dict.fromkeys(
        ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"),
        _LLAMA3_SPLIT,
    ),
    **dict.fromkeys(("dbrx", "smaug-bpe"), _LLAMA3_SPLIT),
    "tekken": _TEKKEN_SPLIT,
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"), _QWEN2_SPLIT),
    "qwen35": _QWEN35_SPLIT,
    **dict.fromkeys(("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), _GPT4O_SPLIT),
}


class Unsupported(Exception):
    """A tokenizer this module does not rebuild (transformers can)."""


def write_folder(metadata: dict, folder: Path) -> None:
    """tokenizer.json, tokenizer_config.json and chat_template.jinja (where the file has one) into `folder`,
    from a GGUF file's metadata (`gguf_meta.read_metadata`)."""
    tokenizer, config = build(metadata)
    (folder / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    template = metadata.get("tokenizer.chat_template")
    if isinstance(template, str):
        (folder / "chat_template.jinja").write_text(template, encoding="utf-8")


def build(metadata: dict):
    """(a `tokenizers.Tokenizer`, the tokenizer_config.json fields) for a GGUF file's metadata."""
    from tokenizers import AddedToken

    kind = metadata.get("tokenizer.ggml.model")
    architecture = metadata.get("general.architecture")
    pre = metadata.get("tokenizer.ggml.pre")
    tokens = metadata.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens:
        raise ValueError("the GGUF metadata holds no tokenizer.ggml.tokens")
    if kind == "gpt2":
        tokenizer, defaults = _byte_level(metadata, tokens)
    elif kind == "llama" and architecture not in _REBUILT_ARCHITECTURES:
        tokenizer, defaults = _sentencepiece(metadata, tokens)
    else:
        raise Unsupported(f"tokenizer.ggml.model {kind!r} of architecture {architecture!r}")

    _add_missing_specials(tokenizer, defaults)  # the class's own defaults
    types = metadata.get("tokenizer.ggml.token_type") or ()
    alphabet = set(byte_level_decoder()) if kind == "gpt2" else None
    control = [
        AddedToken(token, normalized=False, special=True)
        for token, kind_of in zip(tokens, types)
        if kind_of == _CONTROL and (alphabet is None or set(token) <= alphabet)
    ]
    if control:
        tokenizer.add_special_tokens(control)
    known = tokenizer.get_vocab(with_added_tokens=True)
    user_defined = [
        AddedToken(token, normalized=False, special=False)
        for token, kind_of in zip(tokens, types)
        if kind_of == _USER_DEFINED and token in known
    ]
    if user_defined:
        tokenizer.add_tokens(user_defined)
    _set_split(tokenizer, pre)

    specials = {}
    for name in _SPECIALS:
        token_id = metadata.get(_SPECIAL_IDS[name])
        specials[name] = tokens[token_id] if isinstance(token_id, int) and 0 <= token_id < len(tokens) else None
    _add_missing_specials(tokenizer, [t for t in specials.values() if t is not None])
    add_bos = metadata.get("tokenizer.ggml.add_bos_token", kind == "llama")
    add_eos = metadata.get("tokenizer.ggml.add_eos_token", False)
    _set_post_processor(tokenizer, specials, bool(add_bos), bool(add_eos))
    return tokenizer, {name: value for name, value in specials.items() if value is not None}


def _byte_level(metadata: dict, tokens: list[str]):
    """GPT2Tokenizer's backend over the file's vocabulary (tokens outside the byte alphabet respelled in it)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    alphabet = byte_level_decoder()
    spelling = {byte: char for char, byte in alphabet.items()}
    vocab = {
        token if set(token) <= alphabet.keys() else "".join(spelling[b] for b in token.encode("utf-8")): index
        for index, token in enumerate(tokens)
    }
    model = BPE(
        vocab=vocab,
        merges=_merges(metadata, tokens),
        dropout=None,
        continuing_subword_prefix="",
        end_of_word_suffix="",
        fuse_unk=False,
    )
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer, ["<|endoftext|>"]  # GPT2Tokenizer's bos, eos and unk


def _sentencepiece(metadata: dict, tokens: list[str]):
    """LlamaTokenizer's backend: byte-fallback BPE, a `▁` prefix on the first word only."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    vocab = {token: index for index, token in enumerate(tokens)}
    model = BPE(vocab=vocab, merges=_merges(metadata, tokens), fuse_unk=True, byte_fallback=True, dropout=None)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = None
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    return tokenizer, ["<s>", "</s>", "<unk>"]  # LlamaTokenizer's bos, eos and unk, in transformers' order


def _merges(metadata: dict, tokens: list[str]) -> list[tuple[str, ...]]:
    """The file's merges, or those its vocabulary and scores imply (transformers' `generate_merges`)."""
    merges = metadata.get("tokenizer.ggml.merges")
    if isinstance(merges, list):
        return [tuple(merge.split(" ")) for merge in merges]
    scores = metadata.get("tokenizer.ggml.scores")
    if not isinstance(scores, list) or len(scores) != len(tokens):
        raise ValueError("the GGUF metadata holds neither tokenizer.ggml.merges nor one score per token")
    vocab = {token: index for index, token in enumerate(tokens)}
    found = []
    for merge, score in dict(zip(tokens, scores)).items():
        splits = ((merge[:i], merge[i:]) for i in range(1, len(merge)))
        local = [(left, right, score) for left, right in splits if left in vocab and right in vocab]
        found.extend(sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]])))
    found.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in found]


def _add_missing_specials(tokenizer, names: list[str]) -> None:
    """Each token text as a special added token, unless some added token already has that text."""
    from tokenizers import AddedToken

    present = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
    missing = [name for name in dict.fromkeys(names) if name not in present]
    if missing:
        tokenizer.add_tokens([AddedToken(name, special=True) for name in missing])


def _set_split(tokenizer, pre: str | None) -> None:
    from tokenizers import Regex, pre_tokenizers

    split = _SPLITS.get(pre)
    if split is not None:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )


def _set_post_processor(tokenizer, specials: dict, add_bos: bool, add_eos: bool) -> None:
    """BOS / EOS around a single sequence (and a pair), as transformers' `update_post_processor` writes them."""
    from tokenizers import processors

    bos, eos = specials["bos_token"], specials["eos_token"]
    add_bos, add_eos = add_bos and bos is not None, add_eos and eos is not None
    single = f"{(bos + ':0 ') if add_bos else ''}$A:0{(' ' + eos + ':0') if add_eos else ''}"
    pair = f"{single}{(' ' + bos + ':1') if add_bos else ''} $B:1{(' ' + eos + ':1') if add_eos else ''}"
    special_tokens = []
    if add_bos:
        special_tokens.append((bos, tokenizer.token_to_id(bos)))
    if add_eos:
        special_tokens.append((eos, tokenizer.token_to_id(eos)))
    tokenizer.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=special_tokens)
