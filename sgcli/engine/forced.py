"""Jump-forward drafts: the grammar's forced bytes as the token ids the model would most likely write.

A draft is only a guess. The decode loop appends it in one forward pass and then samples
every position as the plain loop would, keeping draft tokens while the sample agrees (as in
speculative decoding, with the grammar as the draft model). So a badly tokenized draft costs
speed, never correctness: outputs stay those of a run without jump-forward.

Forced text can start inside a token (the model wrote `{"na`, the grammar forces `me":`) or
merge with the token before it. As in SGLang's jump-forward, the tail is re-tokenized with the
previous token's bytes; the re-tokenization is used when it keeps that token as it is (the
model's own token is never rewritten), otherwise the forced bytes are tokenized alone.
"""

from __future__ import annotations

from sgcli.tokenizers.vocab import Vocab


def _utf8_prefix(data: bytes) -> str:
    """The longest prefix of `data` that is whole UTF-8 text (forced bytes may end mid-character)."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return ""


def encode_bytes(vocab: Vocab, data: bytes) -> list[int]:
    """Token ids for `data` as a continuation; [] when it cannot be tokenized here."""
    if vocab.encode is None:
        from sgcli.grammar_dev.matching import longest_match_ids

        return longest_match_ids(vocab, data) or []
    text = _utf8_prefix(data)
    return vocab.encode(text) if text else []


def draft_tokens(vocab: Vocab, previous: int | None, forced: bytes, limit: int) -> list[int]:
    """At most `limit` ids spelling (a prefix of) `forced`, tokenized at the boundary with `previous`."""
    if not forced or limit <= 0:
        return []
    if previous is not None and previous not in vocab.special_ids and vocab.tokens[previous]:
        joined = encode_bytes(vocab, vocab.tokens[previous] + forced)
        if len(joined) > 1 and joined[0] == previous:
            return joined[1 : limit + 1]
    return encode_bytes(vocab, forced)[:limit]
