"""Driving a compiled grammar's matcher with token sequences, without a model.

Shared by `sgcli masks`, `compare-backends`, `sgcli test`, `sgcli convert`, lint and the
benchmarks: which backends to run, the token sequences that spell a string, the one
`walk` that feeds them to a matcher, and random walks that sample strings a grammar accepts.

Three ways to spell a string as tokens (see docs/grammar-development.md):
- "bytes": one single-byte token per byte. Token boundaries fall everywhere, so this
  checks the grammar's *language* (the whole string), independent of tokenization.
- "canonical": the tokenizer's own encoding (`Vocab.encode`, no special tokens added),
  i.e. the tokens a model sees when it reads the string.
- "longest": greedy longest-match over the vocabulary, the segmentation a decoder that
  prefers long tokens tends to produce; it differs from "canonical" around merges.
"""

from __future__ import annotations

import hashlib
import random
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sgcli.backends.base import Compiled, Matcher, allowed, allowed_ids, new_bitmask
from sgcli.constraints.spec import ConstraintSpec
from sgcli.errors import UserError
from sgcli.tokenizers.vocab import Vocab

_walk_tables: weakref.WeakKeyDictionary[Vocab, dict] = weakref.WeakKeyDictionary()


def enforcing_backends() -> list[str]:
    """Registered backends that enforce a grammar (testing grammars on one that allows every token is moot)."""
    from sgcli.backends import backend_names, get_backend

    return [n for n in backend_names() if get_backend(n).capabilities.enforces]


def backends_for(spec: ConstraintSpec) -> list[str]:
    """Enforcing backends whose capabilities cover `spec`."""
    from sgcli.backends import get_backend, unsupported_reason

    return [n for n in enforcing_backends() if unsupported_reason(get_backend(n), spec) is None]


def select_backends(choices: list[str] | None) -> list[str]:
    """`--backend NAME... | all | auto` (none given, 'all', 'auto': all) -> names; an unknown name is a usage error."""
    named = refuse_unenforcing(choices)
    if not choices or "all" in choices or "auto" in choices:
        return enforcing_backends()
    return list(dict.fromkeys(named))


def refuse_unenforcing(choices: list[str] | None) -> list[str]:
    """The backends `choices` names (not 'all' or 'auto'), each a known one that constrains: exit 2 otherwise,
    also beside 'all' (dropping it silently would hide the mistake)."""
    from sgcli.backends import get_backend

    named = [get_backend(c).name for c in choices or [] if c not in ("all", "auto")]  # a UserError naming the known
    for name in named:
        check_enforces(name)
    return named


def check_enforces(name: str) -> None:
    """Exit 2 for a backend that constrains nothing (`none`): a dry run, compile check, test or bench on it
    has no matcher to ask, and would pass any grammar on any text."""
    from sgcli.backends import get_backend

    if not get_backend(name).capabilities.enforces:
        raise UserError(
            f"backend '{name}' constrains nothing: it has no matcher to check a grammar or text against",
            hint=f"backends that constrain: {', '.join(enforcing_backends())} (choose with --backend)",
        )


def _tables(vocab: Vocab) -> dict:
    table = _walk_tables.get(vocab)
    if table is None:
        import numpy as np  # here: `sgcli lint` imports this module for its backend list only

        ordinary = np.zeros(len(vocab), dtype=bool)
        ordinary[vocab.ordinary_ids()] = True
        ordinary[list(vocab.stop_ids)] = False
        punct = np.array([_is_punctuation(p) for p in vocab.tokens], dtype=bool) & ordinary
        closing = np.array([_is_closing(p) for p in vocab.tokens], dtype=bool) & ordinary
        single = np.array([len(p) == 1 for p in vocab.tokens], dtype=bool)
        table = {"ordinary": ordinary, "punct": punct, "closing": closing, "single": single}
        _walk_tables[vocab] = table
    return table


def byte_ids(vocab: Vocab, data: bytes) -> list[int] | None:
    """One single-byte token per byte of `data`; None if the vocabulary lacks one of them."""
    by_bytes = vocab.piece_ids
    ids = [by_bytes.get(data[i : i + 1]) for i in range(len(data))]
    return None if any(i is None for i in ids) else ids


def canonical_ids(vocab: Vocab, text: str) -> list[int]:
    if vocab.encode is None:
        raise UserError(
            f"the tokenizer {vocab.source} cannot encode text (only its vocabulary is known)",
            hint="pass a tokenizer.json or a model with --tokenizer",
        )
    return list(vocab.encode(text))


def tokenizations(vocab: Vocab, text: str) -> dict[str, list[int] | None]:
    """The three spellings of `text` described in the module docstring."""
    data = text.encode("utf-8")
    return {
        "bytes": byte_ids(vocab, data),
        "canonical": canonical_ids(vocab, text),
        "longest": vocab.longest_match(data),
    }


@dataclass
class Walk:
    """How a matcher took a token sequence (see `walk`)."""

    taken: int = 0  # tokens accepted before the walk stopped
    refused: str | None = None  # None (all taken), "mask" (only with follow_mask), "accept" or "error"
    in_mask: list[bool] = field(default_factory=list)  # per token tried: did the mask allow it (with a mask)
    mask_s: list[float] = field(default_factory=list)  # seconds per fill_mask, in order
    can_stop: bool = False  # after the last token (False when one was refused)
    error: str | None = None  # the matcher's own error, where a mask left it failed ("error")

    @property
    def accepted(self) -> bool:
        return self.refused is None and self.can_stop

    @property
    def inconsistent(self) -> bool:
        """The mask allowed the refused token but accept() refused it: a backend bug."""
        return self.refused == "accept" and len(self.in_mask) > self.taken and self.in_mask[self.taken]


def walk(
    matcher: Matcher,
    token_ids: Sequence[int],
    mask=None,
    *,
    follow_mask: bool = False,
    on_state: Callable[[int, int | None], None] | None = None,
) -> Walk:
    """Feed `token_ids` to `matcher` one at a time, stopping at the first refused token.

    With `mask`, it is filled before each token and once after the last, as in decoding, and
    `on_state(index, token)` (token None after the last) runs while mask and matcher show the
    state before that token. `follow_mask`: a token the mask forbids is refused without asking
    accept(), as decoding would; otherwise accept() alone decides (the grammar's language).
    """
    result = Walk()
    for index, token in enumerate(token_ids):
        if mask is not None:
            if not _fill(matcher, mask, result, on_state, index, token):
                return result
            result.in_mask.append(allowed(mask, token))
            if follow_mask and not result.in_mask[-1]:
                result.refused = "mask"
                return result
        if not matcher.accept(token):
            result.refused = "accept"
            return result
        result.taken += 1
    if mask is not None and not _fill(matcher, mask, result, on_state, len(token_ids), None):
        return result
    result.can_stop = matcher.can_stop()
    return result


def _fill(matcher: Matcher, mask, result: Walk, on_state, index: int, token: int | None) -> bool:
    """Fill the mask; False (the walk refused with "error") where that left the matcher failed: its
    mask then means nothing (llguidance's "Too many items" left one end token and no stop, which
    `masks` and `test` reported as the text rejected)."""
    t = time.perf_counter()
    matcher.fill_mask(mask)
    result.mask_s.append(time.perf_counter() - t)
    if on_state is not None:
        on_state(index, token)
    failed = _failed(matcher.error, mask)
    if failed is not None:
        result.refused, result.error = "error", failed
        return False
    return True


def _failed(error: str | None, mask) -> str | None:
    """The matcher's error where its mask still allows tokens: it failed, and the mask means nothing. An
    error beside an empty mask is a dead end (sgcli's schema checker found no continuation): the text
    so far cannot be completed, which the next token's refusal reports."""
    if error is None or not allowed_ids(mask, len(mask) * 32).size:
        return None
    return error


def first_mask_error(compiled: Compiled) -> str | None:
    """The matcher's own error after its first mask (llguidance's "Too many items" on a grammar of
    short, overlapping lexemes), or None: such a grammar compiles, then fails at the first step. The
    mask is the one the bounded compile filled (`Compiled.first_step`), not filled again."""
    step = compiled.first_step()
    return _failed(step.error, _words(step.mask))


def accepts_nothing(compiled: Compiled) -> bool:
    """True when the grammar's first step allows no token and it cannot stop: no text matches at all."""
    step = compiled.first_step()
    return not allowed_ids(_words(step.mask), len(compiled.vocab)).size and not step.can_stop


def _words(mask: bytes):
    import numpy as np

    return np.frombuffer(mask, dtype=np.int32)


@dataclass
class Feed:
    """How a matcher took a token sequence, for humans."""

    accepted: bool  # every token taken and the grammar can stop after them
    taken: int  # tokens accepted before the first rejection (= len(ids) when none)
    can_stop: bool
    problem: str | None = None  # why not accepted, for humans
    inconsistent: bool = False  # the mask allowed a token that accept() then refused: a backend bug
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the matcher failed (not the text): its message


def feed(compiled: Compiled, ids: list[int], *, check_mask: bool = False) -> Feed:
    """Feed `ids` to a fresh matcher; accept() decides. With `check_mask`, each token is also
    looked up in the mask first, as in decoding: a token the mask allows but accept() refuses
    is a backend bug (`inconsistent`); one the mask forbids but accept() takes is a note (some
    backends steer generation to one tokenization of forced text, e.g. llguidance)."""
    vocab = compiled.vocab
    w = walk(compiled.matcher(), ids, new_bitmask(len(vocab)) if check_mask else None)
    notes = [
        f"token {i} {_show(vocab, ids[i])} is accepted but the mask forbids it"
        for i in range(w.taken)
        if w.in_mask and not w.in_mask[i]
    ]
    if w.refused == "error":
        why = f"the {compiled.backend} matcher failed at token {w.taken}: {w.error}"
        return Feed(False, w.taken, False, why, notes=notes, error=w.error)
    if w.refused is not None:
        i = w.taken
        if w.inconsistent:
            why = f"token {i} {_show(vocab, ids[i])}: the mask allows it but accept() refused it"
            return Feed(False, i, False, why, inconsistent=True, notes=notes)
        return Feed(False, i, False, f"token {i} {_show(vocab, ids[i])} rejected", notes=notes)
    problem = None if w.can_stop else "all tokens taken, but the grammar cannot stop there"
    return Feed(w.can_stop, len(ids), w.can_stop, problem, notes=notes)


def _show(vocab: Vocab, token: int) -> str:
    return f"#{token} {vocab.tokens[token].decode('utf-8', errors='backslashreplace')!r}"


def accepts_bytes(compiled: Compiled, data: bytes) -> Feed:
    ids = byte_ids(compiled.vocab, data)
    if ids is None:
        return Feed(False, 0, False, "the vocabulary has no single-byte token for some byte of the input")
    return feed(compiled, ids)


def random_walk(
    compiled: Compiled,
    rng: random.Random,
    *,
    max_tokens: int = 64,
    stop_after: int = 8,
    deadline: float | None = None,
) -> bytes | None:
    """Bytes of one random path through the grammar that ends where it can stop; None when
    the walk runs past `max_tokens` without reaching a stopping point, or past `deadline`
    (a `time.monotonic()` value: a grammar whose masks take tens of milliseconds).

    Picks are biased to end walks: half the time a short punctuation token, and after
    `stop_after` tokens: a closing token (quotes, brackets) after which the grammar can stop,
    where one of a few tried is; else half the time any closing token; punctuation of one byte
    only; and the walk stops as soon as it can. In a JSON string of an email format, where the
    walk must write an `@` and then `"}`, this ended 80 of 279 walks where 23 of 400 ended before.
    """
    vocab = compiled.vocab
    table = _tables(vocab)
    matcher = compiled.matcher()
    mask = new_bitmask(len(vocab))
    out = bytearray()
    for step in range(max_tokens):
        if deadline is not None and time.monotonic() > deadline:
            return None
        ending_phase = step >= stop_after
        if matcher.can_stop() and (ending_phase or rng.random() < 0.25):
            return bytes(out)
        matcher.fill_mask(mask)
        choices = allowed_ids(mask, len(vocab))
        choices = choices[table["ordinary"][choices]]
        if not len(choices):
            return bytes(out) if matcher.can_stop() else None
        punct = choices[table["punct"][choices]]
        closing = choices[table["closing"][choices]] if ending_phase else punct[:0]
        if len(closing):
            ending = _ending_token(matcher, closing, rng)
            if ending is not None:
                return bytes(out + vocab.tokens[ending])
        if ending_phase:
            single = punct[table["single"][punct]]
            punct = single if len(single) else punct
        if len(closing) and rng.random() < 0.5:
            pool = closing
        else:
            pool = punct if len(punct) and rng.random() < 0.5 else choices
        token = int(pool[rng.randrange(len(pool))])
        if not matcher.accept(token):
            return None  # the backend's mask and accept() disagree; not this function's to judge
        out += vocab.tokens[token]
    return bytes(out) if matcher.can_stop() else None


def _ending_token(matcher: Matcher, closing, rng: random.Random, tries: int = 8) -> int | None:
    """A closing token after which the grammar can stop (taken), of a few tried and rolled back."""
    for i in rng.sample(range(len(closing)), min(tries, len(closing))):
        token = int(closing[i])
        if matcher.accept(token):
            if matcher.can_stop():
                return token
            matcher.rollback(1)
    return None


def _is_punctuation(piece: bytes) -> bool:
    return 0 < len(piece) <= 2 and all(33 <= b < 127 and not chr(b).isalnum() for b in piece)


def _is_closing(piece: bytes) -> bool:
    return 0 < len(piece) <= 4 and all(b in b"\"')]}>\n" for b in piece)  # a newline ends lines and list items


def sample_strings(
    compiled: Compiled,
    count: int,
    *,
    seed: int = 0,
    attempts_per_sample: int = 5,
    on_walk: Callable[[int, int], None] | None = None,
    seconds: float | None = None,
) -> list[bytes]:
    """Up to `count` distinct accepted strings from random walks (fewer when walks rarely end, or
    when `seconds` run out: transformers-CFG's SMILES grammars, ambiguous enough that xgrammar's
    masks took 30-70 ms, kept `convert`'s check walking for minutes). `on_walk(walks, found)` runs
    after each walk, for progress."""
    rng = random.Random(seed)
    deadline = None if seconds is None else time.monotonic() + seconds
    found: dict[bytes, None] = {}
    for walks in range(1, count * attempts_per_sample + 1):
        if len(found) >= count or (deadline is not None and time.monotonic() > deadline):
            break
        s = random_walk(compiled, rng, deadline=deadline)
        if s is not None:
            found.setdefault(s)
        if on_walk is not None:
            on_walk(walks, len(found))
    return list(found)


def walk_masks(compiled, text: str | None) -> dict:
    """Time the masks along `text`'s own tokens (or just the first mask); digest each mask for agreement.
    Shared by `sgcli compare-backends` and `sgcli bench`."""
    vocab = compiled.vocab
    ids = canonical_ids(vocab, text) if text is not None else []
    bitmask = new_bitmask(len(vocab))
    digests: list[str] = []
    allowed_first = 0

    def record(index: int, token: int | None) -> None:
        nonlocal allowed_first
        digests.append(hashlib.blake2b(bitmask.tobytes(), digest_size=8).hexdigest())
        if index == 0:
            allowed_first = int(allowed_ids(bitmask, len(vocab)).size)

    w = walk(compiled.matcher(), ids, bitmask, follow_mask=True, on_state=record)
    return {
        "mask_ms": [s * 1000 for s in w.mask_s],
        "digests": digests,
        "steps": len(w.mask_s),
        "allowed_first": allowed_first,
        "accepted": None if text is None else w.accepted,
        "rejected_at_token": None if w.refused is None else w.taken,
        "error": w.error,  # the matcher failed (the masks say nothing about the text)
    }
