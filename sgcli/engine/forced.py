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
        from sgcli.backends.matching import longest_match_ids

        return longest_match_ids(vocab, data) or []
    text = _utf8_prefix(data)
    return vocab.encode(text) if text else []


class Spellings:
    """How the model spells forced text, learned in one decode from the drafts it turned down.

    The tokenizer spells `":"` as one token where a model may write `":` and then `"`; every
    later draft of that key separator would then be turned down at the same place, and the
    pass that carried the rest of the draft computed it for nothing. When the model writes a
    token whose bytes are a proper prefix of the drafted token's, later drafts spell that
    token the model's way (its token, then the rest as the tokenizer spells it); when the model
    writes a respelled token whole after all, the respelling is forgotten. Drafts stay guesses:
    this changes how many of them are kept, never the output."""

    def __init__(self, vocab: Vocab):
        self.vocab = vocab
        self.learned: dict[int, list[int]] = {}

    def respell(self, ids: list[int]) -> list[int]:
        return [t for i in ids for t in self.learned.get(i, (i,))]

    def turned_down(self, drafted: int, written: int) -> None:
        """The model wrote `written` where the draft had `drafted`."""
        self.learned.pop(written, None)
        whole, prefix = self.vocab.tokens[drafted], self.vocab.tokens[written]
        if not prefix or len(prefix) >= len(whole) or not whole.startswith(prefix):
            return
        rest = encode_bytes(self.vocab, whole[len(prefix) :])
        if b"".join(self.vocab.tokens[i] for i in rest) == whole[len(prefix) :]:
            self.learned[drafted] = [written, *rest]


def draft_tokens(
    vocab: Vocab, previous: int | None, forced: bytes, limit: int, spellings: Spellings | None = None
) -> list[int]:
    """At most `limit` ids spelling (a prefix of) `forced`, tokenized at the boundary with `previous`
    and respelled as the model has been seen to spell them (`spellings`)."""
    if not forced or limit <= 0:
        return []
    ids = None
    if previous is not None and previous not in vocab.special_ids and vocab.tokens[previous]:
        joined = encode_bytes(vocab, vocab.tokens[previous] + forced)
        if len(joined) > 1 and joined[0] == previous:
            ids = joined[1:]
    if ids is None:
        ids = encode_bytes(vocab, forced)
    return (spellings.respell(ids) if spellings else ids)[:limit]
